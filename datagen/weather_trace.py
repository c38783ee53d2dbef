"""weather_trace: two stations' air temperatures, the stand-in for the DINER paper's weather
trace (two stations of the University of Washington's network, 45,000 readings each), which
is not available here.

The two stations are the hourly 2010 temperatures of Seattle and San Francisco that the PyPI
package ``vega_datasets`` ships (8,759 readings each, in degrees Fahrenheit to 0.1). Each
series is linearly interpolated in time to ``readings`` evenly spaced readings over the year
(the paper's 45,000 per station; interpolation rather than repetition, which would add equal
keys the trace does not have) and rounded to 0.1 F. Relation R is Seattle, S San Francisco,
each in time order with exponential arrival gaps of rate ``lam`` (the paper's lambda = 0.1).
Join key: the temperature in tenths of a degree (``key``, int64); the paper's band join
"temperature difference smaller than 5 degrees" is a band of 49 on it (degrees read as F, the
data's unit: a choice, the paper does not say).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from datagen.arrival_times import arrival_times, check_delays
from datagen.chunks import write_part
from datagen.errors import GeneratorError
from datagen.params import check

NAME = "weather_trace"
STATIONS = ("seattle_temps", "sf_temps")  # R, S


@dataclass(frozen=True)
class Params:
    readings: int = 45_000
    lam: float = 0.1
    fragments: int = 0  # network delays (datagen.arrival_times), Fig 17
    fragment_delay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_delays((), self.fragments, self.fragment_delay)
        check(self.readings >= 2 and self.lam > 0, "readings must be >= 2 and lam > 0")


def station(name: str, readings: int) -> np.ndarray:
    """A station's temperatures in tenths of a degree F, interpolated to ``readings``."""
    try:
        from vega_datasets import data
    except ModuleNotFoundError as e:
        raise GeneratorError("weather_trace needs the vega_datasets package "
                             "(pip install vega_datasets)") from e
    frame = getattr(data, name)()
    hours = (frame["date"] - frame["date"].iloc[0]).dt.total_seconds().to_numpy() / 3600.0
    at = np.linspace(hours[0], hours[-1], readings)
    return np.rint(np.interp(at, hours, frame["temp"].to_numpy()) * 10).astype(np.int64)


def generate(params: dict, out: Path, spark=None, progress: bool = False) -> dict[str, int]:
    p = Params(**params)
    rows = {}
    for i, (name, src) in enumerate(zip(("R", "S"), STATIONS, strict=True)):
        keys = station(src, p.readings)
        t = arrival_times(len(keys), p.lam, np.random.default_rng([p.seed, i]),
                          fragments=p.fragments, fragment_delay=p.fragment_delay)
        table = pa.table({"key": keys, "t": t, "rid": np.arange(len(keys), dtype=np.int64)})
        rows[name] = write_part(table, Path(out) / f"{name}.parquet", 0)  # atomic
    return rows
