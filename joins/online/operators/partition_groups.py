"""D-CAPE (paper ``dcape``): an n-way symmetric hash join over machines in partition groups,
with state spill by productivity, relocation, lazy-disk and active-disk, and clean-up; and
``relocating_shj``, hash partitioning whose groups a D-CAPE-style rule relocates (not listed:
for tests and extensions)."""

from __future__ import annotations

import numpy as np

from joins.online.controller import RelocatingHash, Static
from joins.online.layouts import HashLayout
from joins.online.operator_spec import Operator, Param, Run

# times in the event-time column's unit
PARAMS = {
    "groups": Param(300, "partition groups over the machines (relocation moves whole groups; "
                         "D-CAPE's 300)"),
    "by": Param("mod", "how keys form partition groups: mod (key mod groups, D-CAPE's "
                       "generator) or hash"),
    "assign": Param("contiguous", "initial groups per machine: contiguous, round_robin, or "
                                  "skewed (skew_share on machine 0)"),
    "skew_share": Param(2 / 3, "share of the partition groups on machine 0 with "
                               "assign=skewed"),
    "adapt": Param("none", "D-CAPE's adaptation: none (out of memory stops the run), disk, "
                           "relocate, lazy_disk or active_disk"),
    "push": Param("low_output", "which groups a disk push takes: random, low_output (idle, then "
                                "largest P_s/P_o) or high_output (smallest P_s/P_o)"),
    "push_percent": Param(30.0, "share of a machine's in-memory state one push sends to disk "
                                "(%)"),
    "theta_m": Param(1.0, "a machine pushes when its memory passes theta_m x the budget"),
    "theta_t": Param(None, "groups idle longer than this are pushed first; none: no idle rule",
                     float | None),
    "theta_d": Param(0.8, "relocation starts when the least used machine holds less than "
                          "theta_d of the most used"),
    "min_span": Param(45_000.0, "least event time between two adaptations of the manager"),
    "theta_f": Param(2.0, "active-disk: the slowest machine pushes when Max_Rate/Min_Rate "
                          "exceeds this"),
    "active_from": Param(0.0, "active-disk pushes only once a machine holds this share of its "
                              "budget (0: whenever rates differ, the paper's text)"),
    "msg_seconds": Param(0.001, "modeled latency of one control message of the relocation "
                                "protocol (s)"),
    "bandwidth": Param(125e6, "modeled network bandwidth of a relocation (bytes/s)"),
    "state_bytes": Param(100.0, "modeled bytes of one state tuple (D-CAPE relocation transfer "
                                "time)"),
}


def _owners(groups: int, joiners: int, assign: str, skew_share: float) -> np.ndarray:
    g = np.arange(groups)
    if assign == "contiguous":
        return g * joiners // groups
    if assign == "round_robin":
        return g % joiners
    if assign == "skewed":
        if joiners < 2 or not 0 < skew_share < 1:
            raise ValueError("assign=skewed needs joiners >= 2 and 0 < skew_share < 1")
        first = int(round(skew_share * groups))
        return np.where(g < first, 0, 1 + (g - first) * (joiners - 1) // max(1, groups - first))
    raise ValueError(f"assign must be contiguous, round_robin or skewed, got {assign!r}")


def _dcape(run: Run, *, groups: int, by: str, assign: str, skew_share: float, adapt: str,
           push: str, push_percent: float, theta_m: float, theta_t: float | None,
           theta_d: float, min_span: float, theta_f: float, active_from: float,
           msg_seconds: float, bandwidth: float, state_bytes: float):
    """``adapt``: ``none`` (memory past the budget stops the run), ``disk`` (push
    ``push_percent`` of a machine's state by ``push`` when it passes ``theta_m`` x the
    budget), ``relocate`` (the manager moves groups when M_l/M_m < ``theta_d``, at least
    ``min_span`` apart, no disk), ``lazy_disk`` (both, a spilled group never moves),
    ``active_disk`` (lazy-disk, and the slowest machine pushes when Max_Rate/Min_Rate >
    ``theta_f``) (:mod:`joins.online.programs.dcape`, :mod:`joins.online.dcape_manager`)."""
    from joins.online.dcape_manager import RELOCATING, DCapeManager
    from joins.online.programs.dcape import ADAPT, DCape

    joiners = run.joiners
    if run.graph is not None and not run.graph.shared:
        raise ValueError("dcape joins its inputs on one shared attribute (the paper's "
                         "footnote 2: joins on several columns are out of scope)")
    if adapt not in ADAPT:
        raise ValueError(f"adapt must be one of {', '.join(ADAPT)}, got {adapt!r}")
    if groups < joiners:
        raise ValueError(f"groups ({groups}) must be >= joiners ({joiners})")
    layout = HashLayout(_owners(groups, joiners, assign, skew_share), by)
    params = dict(groups=groups, by=by, adapt=adapt, push=push, push_percent=push_percent,
                  theta_m=theta_m, theta_t=theta_t, seed=run.seed)
    DCape(**params)  # its checks (push, push_percent, theta_m) before any run starts
    for name, v in (("theta_d", theta_d), ("theta_f", theta_f)):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if not 0 <= active_from <= 1:
        raise ValueError(f"active_from must be in [0, 1], got {active_from}")
    if not min_span >= 0:
        raise ValueError(f"min_span must be >= 0, got {min_span}")
    if adapt not in RELOCATING:
        return Static(layout, program="dcape", program_params=params)
    return DCapeManager(layout, params, adapt=adapt, theta_d=theta_d, min_span=min_span,
                        theta_f=theta_f, push_percent=push_percent,
                        total_tuples=run.n_r + run.n_s, msg_seconds=msg_seconds,
                        bandwidth=bandwidth, tuple_bytes=state_bytes, active_from=active_from)


dcape = Operator(
    "dcape", "dcape",
    "D-CAPE: n-way hash join over machines in 300 partition groups, state spill by "
    "productivity, relocation, lazy-disk and active-disk, clean-up", _dcape, params=PARAMS,
    inputs=None, band=False)

relocating_shj = Operator(
    "relocating_shj", None,
    "Hash partitioning with partition groups relocated between workers when the least loaded "
    "holds less than theta of the most loaded (D-CAPE's distributed adaptation)",
    lambda run, *, groups, theta, min_batches: RelocatingHash(
        HashLayout.initial(run.joiners, groups), theta=theta, min_batches=min_batches),
    params={"groups": Param(300, "partition groups over the joiners"),
            "theta": Param(0.8, "relocate when the least loaded worker holds less than this "
                                "share of the most loaded"),
            "min_batches": Param(1, "least micro-batches between two relocations")},
    band=False, listed=False)
