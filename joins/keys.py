"""Join keys as users write them: ``on=key`` (one column, the same name on both sides),
``on=a,b`` (several columns), ``on=left_col=right_col`` or ``on=x=y,a=b`` (different names).

Every algorithm joins on one key column with the same name on both sides (:class:`JoinSpec`).
:func:`with_join_key` gives it one: a composite key is the JSON text of the key columns' values
(exact and unambiguous: typed values, escaped strings; floating-point -0.0 made 0.0, which SQL
equality holds equal), and null when any of them is null, so that, as in SQL, a row with a null
key column matches nothing. A string, not a struct: some algorithms bring keys to the driver
(DER/DDR, FGSD-Join's ranges), where a struct arrives as an unorderable dict. The output keeps
every original column (``l_*``, ``r_*``); the helper key is dropped from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

JOIN_KEY = "__join_key"


class KeySpecError(ValueError):
    """An ``on=`` that names no column or pairs columns wrongly (one line for the CLIs)."""


@dataclass(frozen=True)
class KeySpec:
    left: tuple[str, ...]
    right: tuple[str, ...]

    @property
    def simple(self) -> bool:
        """One column with the same name on both sides: joined as it is."""
        return len(self.left) == 1 and self.left == self.right

    def pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.left, self.right, strict=True))


def parse_on(on: str) -> KeySpec:
    """``"k"``, ``"a,b"``, ``"x=y"`` or ``"x=y,a=b"`` (a bare name pairs with itself)."""
    left, right = [], []
    for part in on.split(","):
        part = part.strip()
        names = [n.strip() for n in part.split("=")]
        if not part or len(names) > 2 or not all(names):
            raise KeySpecError(f"on= must be column names (k, a,b, left_col=right_col), got {on!r}")
        left.append(names[0])
        right.append(names[-1])
    if len(set(left)) != len(left) or len(set(right)) != len(right):
        raise KeySpecError(f"on= names a column twice: {on!r}")
    return KeySpec(tuple(left), tuple(right))


def with_join_key(left, right, keys: KeySpec) -> tuple[object, object, str, Callable]:
    """(left, right, key column, finish): Spark frames that share one key column, and the
    function that drops the helper key from an algorithm's output."""
    from pyspark.sql import functions as F

    if keys.simple:
        return left, right, keys.left[0], lambda out: out

    def composite(frame, cols: tuple[str, ...]):
        if len(cols) == 1:
            return F.col(cols[0])
        kinds = dict(frame.dtypes)
        present, parts = F.lit(True), []
        for i, c in enumerate(cols):
            present = present & F.col(c).isNotNull()
            v = F.col(c)
            if kinds[c] in ("double", "float"):
                v = F.when(v == 0, F.lit(0.0).cast(kinds[c])).otherwise(v)
            parts.append(v.alias(f"k{i}"))
        return F.when(present, F.to_json(F.struct(*parts)))

    lk = left.withColumn(JOIN_KEY, composite(left, keys.left))
    rk = right.withColumn(JOIN_KEY, composite(right, keys.right))
    return lk, rk, JOIN_KEY, lambda out: out.drop(f"l_{JOIN_KEY}", f"r_{JOIN_KEY}")


def run_on_keys(run: Callable, ctx, left, right, on: str, how: str):
    """Run a batch algorithm (``run(ctx, left, right, JoinSpec)``) on ``on=`` as users write
    it; its :class:`joins.api.JoinResult` with the helper key dropped from the output."""
    from dataclasses import replace

    from joins.api import JoinSpec

    lk, rk, key, finish = with_join_key(left, right, parse_on(on))
    result = run(ctx, lk, rk, JoinSpec(on=key, how=how))
    return replace(result, output=finish(result.output))
