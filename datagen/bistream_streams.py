"""bistream_streams: the BiStream paper's timed R and S streams of its queries Q5, Q7 and Band
(Lin et al., SIGMOD 2015, §6), built from the Squall query inputs of :mod:`datagen.squall_query`.

The queries: ``eq5`` (Q5: REGION x NATION x SUPPLIER joins LINEITEM on suppkey), ``eq7`` (Q7:
SUPPLIER x NATION joins LINEITEM on suppkey) and ``bnci`` (Band: |L1.orderkey - L2.orderkey|
<= 1 with L1 a TRUCK lineitem of quantity > 48 and L2 one with shipinstruct NONE). The paper
does not say which side is which stream; the Squall plans that share its queries put the small
pre-joined side in R and LINEITEM in S, kept here.

Rates: the paper runs "asymmetric input rates ... in which case the data volume per second in
each stream remains almost the same", so phi_R chi_R = phi_S chi_S with chi the projected
tuple sizes (:data:`PROJECTED_BYTES`). Which bytes are the "data volume" is not said: with
``stored_overhead_bytes`` (o) the volume is the stored tuple's, projected bytes plus o, so
phi_R (chi_R + o) = phi_S (chi_S + o): equal memory per second on both streams (the figure
base's memory readings; 0, the default, balances the projected bytes). The paper's rate is
one number and does not say whether it is per stream or the total (``rate_reading``:
``total``, the default, splits ``rate`` between the streams; ``per_stream`` makes the total
twice the rate). Arrivals are evenly
spaced on each stream (a rate-controlled feed), ``t`` in seconds; ``profile`` varies the rate
over time (minute, multiplier points, linear between them: Fig 12's rate profile).

Replay: Q5's and Q7's small side (a few hundred suppliers at this scale) cannot keep its share
of the bytes per second for long; it is replayed: the stream cycles through the side's rows,
each pass a new tuple with the same values (a supplier update stream, in effect), in a fresh
seeded order each pass. The large side is replayed the same way if the stream outlasts it
(``passes_S`` in ``streams.json`` says whether it did). Each side's rows are first shuffled
(seeded): the TPC-H files are in key order, which would make the stream sorted on the key.

Tables ``R`` and ``S``: ``key`` (int64), ``t`` (float64, seconds), ``pass`` (the replay pass),
and the group-by attributes of App. B's aggregates (:data:`GROUP_COLUMNS`: ``n_name`` in Q5's
and Q7's R, ``l_year`` in Q7's S);
``streams.json``: each stream's rate, its replay passes and the projected bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datagen.chunks import write_part
from datagen.params import check

NAME = "bistream_streams"
# Bytes of one projected tuple per query (R, S), from the attributes the query needs: an int
# key is 4 bytes, a decimal or a bigint 8, N_NAME its CHAR(25); Band's SELECT * keeps the
# whole LINEITEM row (about 120 bytes of dbgen text).
PROJECTED_BYTES = {
    "eq5": (4 + 25, 4 + 4 + 8 + 8),  # s_suppkey, n_name | l_suppkey, orderkey, price, discount
    "eq7": (4 + 25, 4 + 4 + 4 + 8),  # s_suppkey, n_name | l_suppkey, orderkey, year, volume
    "bnci": (120, 120),
}

# the columns a stream carries besides its key: the group-by attributes of App. B's online
# aggregates (Q5 by nation; Q7 by the supplier's nation and the ship year)
GROUP_COLUMNS = {"eq5": {"R": ("n_name",)}, "eq7": {"R": ("n_name",), "S": ("l_year",)}}


@dataclass(frozen=True)
class Params:
    query: str = "eq7"
    sf: float = 0.2
    tuples: int = 100_000
    rate: float = 10_000.0
    rate_reading: str = "total"
    stored_overhead_bytes: float = 0.0  # > 0: balance stored bytes (projected + this) per second
    profile: tuple[tuple[float, ...], ...] = ()  # ((minute, multiplier), ...): linear between
    minutes: float = 0.0  # > 0: the streams span this long (``tuples`` is then ignored)
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.query in PROJECTED_BYTES,
              f"query must be one of {', '.join(PROJECTED_BYTES)}")
        check(self.sf > 0 and self.tuples >= 0 and self.rate > 0 and self.minutes >= 0
              and self.stored_overhead_bytes >= 0,
              "sf and rate must be > 0, tuples, minutes and stored_overhead_bytes >= 0")
        check(self.rate_reading in ("total", "per_stream"),
              "rate_reading must be total or per_stream")
        pts = [tuple(p) for p in self.profile]
        check(all(len(p) == 2 and p[1] >= 0 for p in pts) and
              all(a[0] < b[0] for a, b in zip(pts, pts[1:], strict=False)),
              "profile takes (minute, multiplier >= 0) points in increasing minutes")


def stream_rates(p: Params) -> tuple[float, float]:
    """(phi_R, phi_S) in tuples per second: equal bytes per second on both streams (the
    projected bytes, plus ``stored_overhead_bytes`` per tuple when memory is balanced)."""
    chi_r, chi_s = (b + p.stored_overhead_bytes for b in PROJECTED_BYTES[p.query])
    total = p.rate * (2 if p.rate_reading == "per_stream" else 1)
    return total * chi_s / (chi_r + chi_s), total * chi_r / (chi_r + chi_s)


def arrival_times(n: int, phi: float, profile) -> np.ndarray:
    """``n`` evenly spaced arrivals at ``phi`` tuples/s (half a gap in), or at ``phi`` times
    the profile's multiplier, linear between its (minute, multiplier) points and flat beyond
    them: the i-th arrival comes when the cumulative rate reaches i + 0.5."""
    if not profile:
        return (np.arange(n) + 0.5) / phi
    pts = np.asarray(profile, float)
    grid = np.arange(0.0, 1.0 + pts[-1, 0] * 60.0, 1.0)  # seconds, up to the last point
    mult = np.interp(grid / 60.0, pts[:, 0], pts[:, 1])
    cum = np.concatenate([[0.0], np.cumsum((mult[1:] + mult[:-1]) / 2 * phi)])
    want = np.arange(n) + 0.5
    inside = want <= cum[-1]
    t = np.empty(n)
    t[inside] = np.interp(want[inside], cum, grid)
    tail = pts[-1, 1] * phi  # beyond the profile: its last rate
    t[~inside] = grid[-1] + (want[~inside] - cum[-1]) / tail if tail > 0 else np.inf
    return t


def _replayed(rows: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` tuples cycling through a side's ``rows`` (their indices), each pass in a fresh
    random order; and each tuple's pass."""
    if n == 0 or not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    passes = -(-n // rows)
    out = np.concatenate([rng.permutation(rows) for _ in range(passes)])[:n]
    return out, np.arange(n, dtype=np.int64) // rows


def generate(params: dict, out: Path, spark=None, progress: bool = False) -> dict[str, int]:
    from datagen import materialize

    p = Params(**params)
    src = Path(materialize("squall_query", {"query": p.query, "sf": p.sf, "z": 0.0,
                                            "seed": p.seed}, spark=spark, progress=progress))
    phi_r, phi_s = stream_rates(p)
    n_r = int(round(p.tuples * phi_r / (phi_r + phi_s)))
    counts = {"R": n_r, "S": p.tuples - n_r}
    if p.minutes > 0:  # as many arrivals as the rates give in that span
        span = p.minutes * 60.0
        peak = max([1.0, *(m for _, m in p.profile)])  # at most this many per second
        counts = {name: int(np.searchsorted(arrival_times(int(phi * span * peak) + 10, phi,
                                                          p.profile), span, "right"))
                  for name, phi in (("R", phi_r), ("S", phi_s))}
    rows: dict[str, int] = {}
    info: dict = {"projected_bytes": PROJECTED_BYTES[p.query]}
    for name, n, phi in (("R", counts["R"], phi_r), ("S", counts["S"], phi_s)):
        cols = GROUP_COLUMNS.get(p.query, {}).get(name, ())
        side = pq.read_table(src / f"{name}.parquet", columns=["key", *cols])
        rng = np.random.default_rng([p.seed, ord(name)])
        idx, passes = _replayed(side.num_rows, n, rng)
        key = side["key"].to_numpy().astype(np.int64)[idx]
        t = arrival_times(len(key), phi, p.profile)
        table = pa.table({"key": key, "t": t, "pass": passes,
                          **{c: side[c].take(pa.array(idx)) for c in cols}})
        rows[name] = write_part(table, Path(out) / f"{name}.parquet", 0)
        info[f"passes_{name}"] = int(passes.max() + 1) if len(passes) else 0
        info[f"rate_{name}"] = phi
    (Path(out) / "streams.json").write_text(json.dumps(info))
    return rows
