"""miner_chain: the DINER paper's multi-way inputs (section 5.5, Figs 20-22): a chain
R1 -a1- R2 -a2- R3 -a3- R4 of 2, 3 or 4 timed relations, or its one-attribute star (SSTAR).

The two middle relations R2 and R3 have ``middle`` tuples each; their shared attribute a2 is
Zipf (exponent ``skew``, the paper's 1) over ``keys`` values [0, keys - 1] (rank 1 is value 0;
``permute`` maps ranks to values by a seeded permutation): the many-to-many join. With 3
inputs R1 joins R2 as a key: R1.a1 holds each of the ``keys`` values once and R2.a1, a foreign
key, is Zipf as well; with 4 inputs R4 joins R3 the same way on a3. Adding a key relation so
leaves the join's size (|R2 join R3|) unchanged, as the paper says. The 2-input query is R2
join R3 on a2 alone. ``star``: SSTAR, one attribute ``a`` for every relation (R2.a, R3.a the
Zipf values of a2, R1.a and R4.a the keys), the join MJoin can run (Fig 22, "the same
datasets").

Arrival times: exponential gaps, each relation at rate ``lam * size / middle`` (the middle
relations at the paper's lambda = 0.1), so every relation arrives over the same span (a choice:
the paper gives one lambda and relations of unequal sizes); ``key_rate="same"``: the other
reading, every relation at ``lam``, so the key relations are complete within the first tenth
of the run; a relation's arrival times are seeded by its name, so the 2-, 3- and 4-input
queries share those of the relations they have in common. ``fragments`` and ``fragment_delay`` cut each
relation into fragments with pauses (:mod:`datagen.arrival_times`: the delays of Fig 21).

Tables ``R1``..``R4`` (those of the query): the join attributes (int64), ``t`` (float64 arrival
time), ``rid`` (the tuple's number in its relation); ``query.json`` names the inputs in chain
order and the join edges.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from datagen.arrival_times import arrival_times, check_delays
from datagen.chunks import write_part
from datagen.params import check
from datagen.zipf import sample_zipf

NAME = "miner_chain"


@dataclass(frozen=True)
class Params:
    inputs: int = 4
    middle: int = 100_000
    keys: int = 10_000
    skew: float = 1.0
    star: bool = False
    permute: bool = False
    lam: float = 0.1
    key_rate: str = "span"
    fragments: int = 0
    fragment_delay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.inputs in (2, 3, 4), "inputs must be 2, 3 or 4 (the paper's chains)")
        check(self.middle >= 1 and self.keys >= 1, "middle and keys must be >= 1")
        check(self.skew >= 0 and self.lam > 0, "skew must be >= 0 and lam > 0")
        check_delays((), self.fragments, self.fragment_delay)
        check(self.key_rate in ("span", "same"), "key_rate must be 'span' or 'same'")


def query(inputs: int, star: bool) -> tuple[list[str], list[str]]:
    """The relations in chain order and the join edges ("R1.a1=R2.a1", ...)."""
    names = {2: ["R2", "R3"], 3: ["R1", "R2", "R3"], 4: ["R1", "R2", "R3", "R4"]}[inputs]
    edges = []
    for a, b in zip(names[:-1], names[1:], strict=True):
        col = "a" if star else f"a{int(a[1:])}"
        edges.append(f"{a}.{col}={b}.{col}")
    return names, edges


def _zipf_values(p: Params, rng: np.random.Generator, n: int, perm: np.ndarray | None):
    ranks = sample_zipf(rng, p.skew, p.keys, n) - 1  # rank 1 -> value 0
    return ranks if perm is None else perm[ranks]


def generate(params: dict, out: Path, spark=None, progress: bool = False) -> dict[str, int]:
    p = Params(**params)
    names, edges = query(p.inputs, p.star)
    root = np.random.default_rng([p.seed, 0])
    perm = root.permutation(p.keys) if p.permute else None
    a2 = {r: _zipf_values(p, np.random.default_rng([p.seed, i]), p.middle, perm)
          for i, r in ((2, "R2"), (3, "R3"))}
    fk = {r: _zipf_values(p, np.random.default_rng([p.seed, i]), p.middle, perm)
          for i, r in ((12, "R2"), (13, "R3"))}  # R2.a1, R3.a3
    cols: dict[str, dict[str, np.ndarray]] = {}
    for i, r in ((1, "R1"), (4, "R4")):  # each key once, in a seeded order
        cols[r] = {"a" if p.star else f"a{1 if r == 'R1' else 3}":
                   np.random.default_rng([p.seed, 20 + i]).permutation(p.keys)}
    if p.star:
        cols["R2"], cols["R3"] = {"a": a2["R2"]}, {"a": a2["R3"]}
    else:
        cols["R2"] = {"a1": fk["R2"], "a2": a2["R2"]} if "R1" in names else {"a2": a2["R2"]}
        cols["R3"] = {"a2": a2["R3"], "a3": fk["R3"]} if "R4" in names else {"a2": a2["R3"]}
    rows = {}
    for r in names:
        c = cols[r]
        n = len(next(iter(c.values())))
        lam = p.lam * n / p.middle if p.key_rate == "span" else p.lam
        # seeded by the relation's name: R2 arrives alike in the 2-, 3- and 4-input queries
        t = arrival_times(n, lam, np.random.default_rng([p.seed, 40 + int(r[1:])]),
                          fragments=p.fragments, fragment_delay=p.fragment_delay)
        table = pa.table({**{k: v.astype(np.int64) for k, v in c.items()}, "t": t,
                          "rid": np.arange(n, dtype=np.int64)})
        rows[r] = write_part(table, Path(out) / f"{r}.parquet", 0)
    (Path(out) / "query.json").write_text(json.dumps({"inputs": names, "edges": edges}))
    return rows
