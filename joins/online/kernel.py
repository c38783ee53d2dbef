"""Local join kernels: a joiner's stored tuples of one relation and its index.

The index is a key-sorted array (numpy). Band joins (|r - s| <= w) need an ordered index (the
paper used balanced trees); for equi-joins the paper used hash maps, and a sorted array with
binary search gives the same result with vectorised probes and compact, cheaply pickled state
(a per-key dict would cost a Python object per tuple). Null keys are stored (they count in the
ILF, as every received tuple is stored) after the non-null ones and never match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

EMPTY_F = np.zeros(0, np.float64)
EMPTY_I = np.zeros(0, np.int64)
EMPTY_U = np.zeros(0, np.uint32)


class Predicate(Protocol):
    """The local join kernel's predicate over the key-sorted index: the pluggable part.

    Any predicate whose matches for one probe key form one contiguous range of the sorted
    stored keys plugs in (equality, a band, an inequality); ``probes_are_r`` says which side
    the probe keys come from, for predicates that are not symmetric. Probing, migration,
    spilling and the clean-up phase all go through :meth:`ranges`.
    """

    name: str

    def ranges(self, stored: np.ndarray, probe: np.ndarray,
               probes_are_r: bool) -> tuple[np.ndarray, np.ndarray]:
        """[lo, hi) into ``stored`` (sorted, no NaN) of the matches of each probe key."""
        ...


@dataclass(frozen=True)
class Equi:
    """r.key = s.key."""

    name: str = "equi"

    def ranges(self, stored, probe, probes_are_r):
        return np.searchsorted(stored, probe, "left"), np.searchsorted(stored, probe, "right")


@dataclass(frozen=True)
class Band:
    """|r.key - s.key| <= width (the paper's band joins)."""

    width: float
    name: str = "band"

    def ranges(self, stored, probe, probes_are_r):
        return (np.searchsorted(stored, probe - self.width, "left"),
                np.searchsorted(stored, probe + self.width, "right"))


EQUI = Equi()


def as_predicate(predicate: Predicate | float | None) -> Predicate:
    """A predicate from the engine's shorthand: None is equality, a number a band width."""
    if predicate is None:
        return EQUI
    if isinstance(predicate, int | float):
        return Band(float(predicate))
    return predicate


class SideStore:
    """Stored tuples of one relation at one joiner: key (sorted, NaN last), tuple id, arrival
    sequence number, routing coordinate u (needed to recompute placements on migration) and,
    in event-time runs only, the event time ``ts`` (None otherwise: no bytes spent on it)."""

    __slots__ = ("key", "tid", "seq", "u", "nvalid", "ts")

    def __init__(self, key=EMPTY_F, tid=EMPTY_I, seq=EMPTY_I, u=EMPTY_U, nvalid: int | None = None,
                 *, presorted: bool = False, ts: np.ndarray | None = None) -> None:
        key = np.asarray(key, np.float64)
        if not presorted:
            order = np.argsort(key, kind="stable")
            key, tid, seq, u = key[order], np.asarray(tid)[order], np.asarray(seq)[order], \
                np.asarray(u)[order]
            if ts is not None:
                ts = np.asarray(ts)[order]
        self.key = key
        self.tid = np.asarray(tid, np.int64)
        self.seq = np.asarray(seq, np.int64)
        self.u = np.asarray(u, np.uint32)
        self.ts = None if ts is None else np.asarray(ts, np.float64)
        self.nvalid = int(np.count_nonzero(~np.isnan(key))) if nvalid is None else nvalid

    def __len__(self) -> int:
        return len(self.key)

    def insert(self, other: SideStore) -> None:
        """Merge another (sorted) store in: O(n + k) with one positional insert per array."""
        if not len(other):
            return
        if not len(self):
            self.key, self.tid, self.seq, self.u = other.key, other.tid, other.seq, other.u
            self.ts = other.ts
            self.nvalid = other.nvalid
            return
        pos = np.searchsorted(self.key[: self.nvalid], other.key[: other.nvalid], side="right")
        pos = np.concatenate([pos, np.full(len(other) - other.nvalid, len(self))])
        self.key = np.insert(self.key, pos, other.key)
        self.tid = np.insert(self.tid, pos, other.tid)
        self.seq = np.insert(self.seq, pos, other.seq)
        self.u = np.insert(self.u, pos, other.u)
        if self.ts is not None:
            self.ts = np.insert(self.ts, pos, other.ts)
        self.nvalid += other.nvalid

    def select(self, mask: np.ndarray) -> SideStore:
        """The subset (still sorted)."""
        return SideStore(self.key[mask], self.tid[mask], self.seq[mask], self.u[mask],
                         int(np.count_nonzero(mask[: self.nvalid])), presorted=True,
                         ts=None if self.ts is None else self.ts[mask])

    @staticmethod
    def concat(stores: list[SideStore]) -> SideStore:
        """One store of several (re-sorted)."""
        stores = [x for x in stores if len(x)] or stores[:1] or [SideStore()]
        ts = None if stores[0].ts is None else np.concatenate([x.ts for x in stores])
        return SideStore(np.concatenate([x.key for x in stores]),
                         np.concatenate([x.tid for x in stores]),
                         np.concatenate([x.seq for x in stores]),
                         np.concatenate([x.u for x in stores]), ts=ts)

    def head(self, k: int) -> tuple[SideStore, SideStore]:
        """(first k tuples, the rest) in a deterministic order (for rate-limited sending)."""
        mask = np.zeros(len(self), dtype=bool)
        mask[:k] = True
        return self.select(mask), self.select(~mask)

    def ranges(self, qkey: np.ndarray, predicate: Predicate | float | None,
               probes_are_r: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """For each probe key, the index range of matching stored tuples (empty for nulls).

        ``predicate``: a :class:`Predicate`, or (shorthand) a band width, or None for equality.
        """
        kv = self.key[: self.nvalid]
        lo, hi = as_predicate(predicate).ranges(kv, qkey, probes_are_r)
        null = np.isnan(qkey)
        if null.any():
            lo, hi = np.where(null, 0, lo), np.where(null, 0, hi)
        return lo, hi


def expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (probe index, stored index) pairs of the ranges, vectorised."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return EMPTY_I, EMPTY_I
    probe = np.repeat(np.arange(len(lo)), counts)
    starts = np.cumsum(counts) - counts
    stored = np.repeat(lo, counts) + (np.arange(total) - np.repeat(starts, counts))
    return probe, stored


class ProbeResult:
    """Output of probing: an exact count, and the result rows as tid tuples (one array per
    input: (r_tid, s_tid) for two inputs) when asked for. A worker program may label outputs
    with a phase of its own (DINER's ``arriving``, ``reactive``); unlabelled outputs belong to
    the engine's phase (``normal`` or ``cleanup``). A program with a virtual clock sets
    ``clock`` (a callable) and each row keeps the time it was produced at; without one it is
    NaN (the engine then gives the tick's end)."""

    __slots__ = ("count", "rows", "by_phase", "clock")

    def __init__(self) -> None:
        self.count = 0
        self.rows: list[tuple[str | None, float, tuple[np.ndarray, ...]]] = []
        self.by_phase: dict[str, int] = {}  # outputs of program-named phases
        self.clock = None

    def add(self, n: int, *tids: np.ndarray, phase: str | None = None) -> None:
        self.count += int(n)
        if phase is not None:
            self.by_phase[phase] = self.by_phase.get(phase, 0) + int(n)
        if tids and tids[0] is not None and len(tids[0]):
            at = float(self.clock()) if self.clock is not None else np.nan
            self.rows.append((phase, at, tids))

    def pairs(self, width: int = 2) -> tuple[np.ndarray, ...]:
        return _stack([t for _, _, t in self.rows], width)

    def pairs_by_phase(self, width: int, default: str,
                       at: float = np.nan) -> dict[str, tuple[np.ndarray, ...]]:
        """The rows grouped by phase (unlabelled ones under ``default``): ``width`` tid arrays
        and the virtual time each row was produced at (``at`` where the program has no
        clock)."""
        groups: dict[str, list] = {}
        for ph, t_at, t in self.rows:
            when = np.full(len(t[0]), at if np.isnan(t_at) else t_at)
            groups.setdefault(ph or default, []).append((*t, when))
        return {ph: _stack(rows, width + 1) for ph, rows in groups.items()}


def _stack(rows: list[tuple[np.ndarray, ...]], width: int) -> tuple[np.ndarray, ...]:
    if not rows:
        return tuple(EMPTY_I for _ in range(width))
    return tuple(np.concatenate([r[k] for r in rows]) for k in range(width))


def probe(store: SideStore, probes: SideStore, probes_are_r: bool,
          predicate: Predicate | float | None, out: ProbeResult, want_pairs: bool, *,
          stored_seq_min: int | None = None,
          before_probe: bool = False, window: float | None = None) -> None:
    """Join ``probes`` (one relation) against ``store`` (the other).

    ``stored_seq_min``: only stored tuples that arrived at or after this sequence number count
    (a migrated tuple joins only the new epoch's tuples, Alg 3 line 10). ``before_probe``: only
    stored tuples that arrived before the probing tuple count (arrival-order rule for pairs
    that meet within one micro-batch). ``window``: only pairs whose event times differ by at
    most this much (sliding-window joins). Counting without pairs never materialises them when
    no per-pair filter is needed.
    """
    if not len(probes) or not len(store):
        return
    lo, hi = store.ranges(probes.key, predicate, probes_are_r)
    if not want_pairs and not before_probe and window is None:
        if stored_seq_min is None:
            out.add(int((hi - lo).sum()))
        else:
            late = np.concatenate([[0], np.cumsum(store.seq[: store.nvalid] >= stored_seq_min)])
            out.add(int((late[hi] - late[lo]).sum()))
        return
    pi, si = expand(lo, hi)
    keep = np.ones(len(pi), dtype=bool)
    if stored_seq_min is not None:
        keep &= store.seq[si] >= stored_seq_min
    if before_probe:
        keep &= store.seq[si] < probes.seq[pi]
    if window is not None:
        keep &= np.abs(store.ts[si] - probes.ts[pi]) <= window
    pi, si = pi[keep], si[keep]
    if want_pairs:
        ptid, stid = probes.tid[pi], store.tid[si]
        out.add(len(pi), *((ptid, stid) if probes_are_r else (stid, ptid)))
    else:
        out.add(len(pi))
