"""XJoin (Urhan and Franklin, 2000), a baseline of the DINER paper (2.9, Figs 7-8), as a
worker program: RPJ's machinery (:mod:`joins.online.programs.rpj`: buckets, segments, the
timestamp duplicate check, the clean-up) with XJoin's two policies.

* **Flushing**: when the memory would pass the budget, "the partition with the greatest number
  of tuples is flushed to disk", whole; the other relation's bucket stays in memory (the
  paper's "remain on disk" read as: is not flushed).
* **Second stage** (reactive, when the inputs block for ``wait_thresh``): a disk bucket of one
  relation against the memory bucket of the other, never two disk buckets; the pass with the
  most pairs not considered yet goes first (XJoin's choice of partition is by size; a
  choice), and the input is checked after each pass.
* **Third stage** (clean-up): as RPJ's, every bucket merged down to one segment group.
"""

from __future__ import annotations

import numpy as np

from joins.online.programs.rpj import RateBasedProgressive


class XJoin(RateBasedProgressive):
    name = "xjoin"
    merges = False

    def _flush_victim(self, ws) -> None:
        rel, j = np.unravel_index(int(np.argmax(ws.count)), ws.count.shape)
        self._spill(ws, int(rel), int(j), int(ws.count[rel, j]), ws.events)

    def _keys(self, ws, kind, j, n):
        """Passes only (no merge is ever a task), ranked by the pairs they have not
        considered."""
        return (n,)
