"""Random join inputs for the property tests: small (key, payload) relations with null keys.

Few distinct keys on purpose, so random draws hit hot keys, one-sided keys and duplicates.
"""

from __future__ import annotations

import pandas as pd
from hypothesis import strategies as st


def keyed_rows(max_key: int = 4, max_size: int = 25) -> st.SearchStrategy:
    """Lists of ``(key, payload)`` with keys in ``1..max_key`` or null."""
    return st.lists(st.tuples(st.one_of(st.none(), st.integers(1, max_key)), st.integers(0, 3)),
                    max_size=max_size)


def frames(left: list, right: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The drawn rows as ``(key, a)`` and ``(key, b)`` frames with nullable integer keys."""
    lf = pd.DataFrame(left, columns=["key", "a"]).astype({"key": "Int64", "a": "int64"})
    rf = pd.DataFrame(right, columns=["key", "b"]).astype({"key": "Int64", "b": "int64"})
    return lf, rf
