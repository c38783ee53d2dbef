"""MJoin (paper ``diner``: DINER's n-way baseline, also D-CAPE's per-machine join): an n-way
symmetric hash join - a new tuple probes the other inputs' stored tuples (the smallest
candidate first: a stand-in for selectivity, the paper's order), then is stored."""

from __future__ import annotations

from joins.online.controller import Static
from joins.online.layouts import HashLayout, OneSiteLayout
from joins.online.operator_spec import Operator, Param, Run
from joins.online.operators.single_site import N_PART, ONE_SITE, one_site


def _mjoin(run: Run, *, groups: int | None, flushing: str | None, **flush_params):
    """Hash-partitioned on the shared attribute when every edge uses one (``groups`` partition
    groups over the J workers); on one worker otherwise (a join on several attributes cannot
    be split on one of them without replication). ``flushing="coordinated"``: the DINER
    paper's MJoin baseline (Fig 22), one site under the memory budget whose largest hash
    bucket (``n_part`` of them) leaves every input at once
    (:class:`joins.online.programs.miner.MJoinCoordinated`)."""
    graph = run.graph
    if flushing is not None:
        if flushing != "coordinated":
            raise ValueError(f"mjoin's flushing is 'coordinated' or none, got {flushing!r}")
        if graph is not None and not graph.shared:
            raise ValueError("mjoin's coordinated flushing needs one shared join attribute")
        if run.band is not None:
            raise ValueError("mjoin's coordinated flushing joins on equality only: it cannot "
                             "run a band join")
        return one_site("mjoin_flush", run, flush_params)
    if graph is not None and not graph.shared:
        if run.joiners != 1:
            raise ValueError("mjoin on several attributes runs on one worker: joiners=1")
        return Static(OneSiteLayout(), program="mjoin")
    if run.band is not None and run.joiners > 1:
        raise ValueError("a band join cannot be hash-partitioned: mjoin with band needs "
                         "joiners=1")
    return Static(HashLayout.initial(run.joiners, groups), program="mjoin")


mjoin = Operator(
    "mjoin", "diner",
    "MJoin: n-way symmetric hash join (DINER's baseline, D-CAPE's per-machine join)", _mjoin,
    params={
        "groups": Param(None, "partition groups over the joiners; none means one per joiner",
                        int | None),
        "flushing": Param(None, "mjoin under a memory budget: 'coordinated' evicts the largest "
                                "hash bucket from every input, one site (the DINER paper's "
                                "MJoin baseline, Fig 22)", str | None),
        "n_part": N_PART, **ONE_SITE,  # the coordinated flushing's
    }, inputs=None)
