"""The contract every batch join algorithm implements.

Output convention (shared by every algorithm and the DuckDB oracle): the joined rows carry
every column of the left input prefixed ``l_`` and every column of the right input prefixed
``r_``; for outer joins the missing side is all nulls. Null keys never match.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

JoinType = Literal["inner", "left", "right", "full"]
JOIN_TYPES: tuple[str, ...] = ("inner", "left", "right", "full")


class BudgetExceeded(RuntimeError):
    """A scaled resource rule (executor memory) is violated: the point is a result, not a crash."""

    status = "oom"

    def __init__(self, what: str, needed_bytes: float, budget_bytes: float) -> None:
        super().__init__(f"{what} needs {needed_bytes:,.0f} B > budget {budget_bytes:,.0f} B")
        self.what = what
        self.needed_bytes = needed_bytes
        self.budget_bytes = budget_bytes


@dataclass(frozen=True)
class JoinSpec:
    """What to join: one key column with the same name on both sides."""

    on: str = "key"
    how: JoinType = "inner"
    self_join: bool = False  # right is the same relation as left (same-attribute self-join)


@dataclass
class BatchContext:
    """Everything an algorithm may use besides its inputs.

    ``executors`` is the modeled executor count E (the paper's n); ``partitions`` the
    shuffle partition count P (the paper used 3-5 x E). ``memory_budget_bytes`` is the scaled
    executor memory: an algorithm that would hold more than this in one task or broadcast
    raises :class:`BudgetExceeded` via :meth:`require_memory`.
    """

    spark: SparkSession
    executors: int = 4
    partitions: int = 16
    seed: int = 0
    memory_budget_bytes: float | None = None
    record_bytes: int | None = None  # modeled size of one input record, for budget rules
    params: Mapping[str, Any] = field(default_factory=dict)

    def require_memory(self, what: str, needed_bytes: float) -> None:
        if self.memory_budget_bytes is not None and needed_bytes > self.memory_budget_bytes:
            raise BudgetExceeded(what, needed_bytes, self.memory_budget_bytes)


@dataclass
class JoinResult:
    """The joined rows (lazy) and exact algorithm-specific counts (iterations, hot keys, ...).

    ``sql_conf`` holds Spark SQL options the output's action must run under (applied by
    :func:`joins.batch.sql_conf.sql_conf` around the action, then restored), because Spark
    plans lazily and a global setting would leak into the next algorithm.
    """

    output: DataFrame
    # exact counts; "uncounted_seconds" = driver time of preparation the paper leaves out
    extra: dict[str, float] = field(default_factory=dict)
    sql_conf: dict[str, Any] = field(default_factory=dict)


def uncounted(spark: SparkSession, what: str):
    """Context manager marking the Spark jobs run inside it as not part of the algorithm's cost
    (preparation the paper does not count, e.g. DER's record ids): metrics capture
    (:mod:`runtime.spark_metrics`) leaves their tasks out of modeled time."""
    from contextlib import contextmanager

    from runtime.spark_metrics import UNCOUNTED_JOB_PREFIX

    @contextmanager
    def _mark():
        sc = spark.sparkContext
        previous = sc.getLocalProperty("spark.job.description")
        sc.setJobDescription(f"{UNCOUNTED_JOB_PREFIX} {what}")
        try:
            yield
        finally:
            sc.setJobDescription(previous)

    return _mark()


def prefixed(df: DataFrame, prefix: str) -> DataFrame:
    """Rename every column to ``prefix + name`` (the output convention above)."""
    return df.toDF(*[prefix + c for c in df.columns])


def consume_output(output: DataFrame) -> tuple[int, int]:
    """Materialize every column of every output row; return (rows, order-free checksum).

    ``count()`` alone lets Spark prune the payload columns, so a plain shuffle join would move
    only keys while an algorithm that carries whole records (Tree-Join's record lists) cannot:
    the paper's joins produce their full output rows. Hashing every column of every row forces
    the same work on every algorithm, and the sum of the row hashes (exact, as a decimal) is
    the same for any two correct algorithms on the same inputs.
    """
    from pyspark.sql import functions as F

    row = output.agg(
        F.count(F.lit(1)),
        F.sum(F.xxhash64(*output.columns).cast("decimal(38,0)")),
    ).collect()[0]
    return int(row[0]), int(row[1] or 0)
