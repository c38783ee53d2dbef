"""Small readers shared by the datagen tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds


def read(folder: Path, table: str) -> pd.DataFrame:
    return ds.dataset(Path(folder) / f"{table}.parquet", format="parquet").to_table().to_pandas()


def part_bytes(folder: Path) -> dict[str, bytes]:
    """Every part file's bytes, keyed by its path relative to the input folder."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.glob("*.parquet/part-*.parquet"))}
