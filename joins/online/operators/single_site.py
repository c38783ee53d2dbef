"""The DINER paper's single-site operators (paper ``diner``): one worker under the memory
budget (``budget=`` tuples) running its program, with the time model's costs in the arrival
times' unit: DINER, its baselines HMJ, RPJ, XJoin and PMJ, and MINER (DINER for joins of n
inputs on different attributes)."""

from __future__ import annotations

from joins.online.controller import Static
from joins.online.layouts import OneSiteLayout
from joins.online.operator_spec import Operator, Param, Run

# the time model and disk blocks every single-site program takes
ONE_SITE: dict[str, Param] = {
    "tups_per_block": Param(50, "tuples per disk block (the paper: 10 KB blocks of 200-byte "
                                "tuples, 50)"),
    "wait_thresh": Param(25.0, "WaitThresh: time with no arrival before the reactive phase "
                               "starts"),
    "c_read": Param(0.2, "modeled time of reading one disk block"),
    "c_write": Param(0.2, "modeled time of writing one disk block"),
    "c_join": Param(0.05, "modeled time of joining one block read in the reactive phase or "
                          "clean-up"),
    "c_arrive": Param(0.0, "modeled time of processing one arrival (0: arrivals never wait for "
                           "the CPU)"),
}
REACTIVE_NL = {  # DINER's and MINER's reactive phase
    "max_outer_mem": Param(19, "DINER's MaxOuterMem: outer blocks loaded per ReactiveNL "
                               "batch"),
    "max_new_arr": Param(1000, "DINER's MaxNewArr: buffered arrivals that end the reactive "
                               "phase"),
}
N_PART = Param(100, "hash buckets per relation (HMJ, XJoin, RPJ, MJoin's coordinated "
                    "flushing; the paper does not give it)")
FAN_IN = Param(10, "segments merged per unit of the merging phase (the paper's F; PMJ: runs, "
                   "F/2 run pairs)")
HASH_BUCKETS = {"n_part": N_PART, "fan_in": FAN_IN, **ONE_SITE}  # HMJ's, RPJ's and XJoin's


def one_site(program: str, run: Run, params: dict) -> Static:
    """One worker running ``program`` with ``params`` (and the run's seed)."""
    if run.joiners != 1:
        raise ValueError(f"{program} is a single-site operator: joiners=1")
    return Static(OneSiteLayout(), program=program, program_params={**params, "seed": run.seed})


def _single(program: str, description: str, params: dict[str, Param], *, band: bool,
            inputs: int | None = 2) -> Operator:
    return Operator(program, "diner", description,
                    lambda run, **p: one_site(program, run, p), params=params, band=band,
                    inputs=inputs)


diner = _single(
    "diner", "DINER: single-site join under a memory budget, Up/Md/Lw flushing, ReactiveNL "
    "between arrivals, clean-up", {**ONE_SITE, **REACTIVE_NL}, band=True)
hmj = _single(
    "hmj", "Hash-Merge Join: hash buckets, largest bucket pair flushed as sorted segments, "
    "merges of F segments between arrivals (DINER's baseline)",
    HASH_BUCKETS, band=False)
rpj = _single(
    "rpj", "Rate-based Progressive Join: flushes the buckets least likely to be probed, "
    "reactive passes or merges by expected output rate (DINER's baseline)",
    {**HASH_BUCKETS,
     "n_flush": Param(None, "tuples RPJ flushes at a time, from the buckets least likely to be "
                            "probed (default one block)", int | None)}, band=False)
xjoin = _single(
    "xjoin", "XJoin: hash buckets, the largest flushed whole, disk buckets joined with memory "
    "buckets between arrivals (DINER's baseline)",
    HASH_BUCKETS, band=False)
pmj = _single(
    "pmj", "Progressive Merge Join: loads sorted and joined when the memory is full, run pairs "
    "merged after the last arrival; band joins too (DINER's baseline)",
    {"fan_in": FAN_IN, **ONE_SITE}, band=True)
miner = _single(
    "miner", "MINER: DINER for chain, star and snowflake joins of n inputs on different "
    "attributes, an index and Up/Md/Lw areas per attribute, odometer ReactiveNL, clean-up",
    {**ONE_SITE, **REACTIVE_NL}, band=False, inputs=None)
