"""Temporarily set Spark SQL options for one algorithm's run, restoring the previous values."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any


@contextmanager
def sql_conf(spark, settings: Mapping[str, Any]) -> Iterator[None]:
    previous = {k: spark.conf.get(k, None) for k in settings}
    try:
        for k, v in settings.items():
            spark.conf.set(k, str(v))
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


# Plain shuffle joins: no adaptive re-planning, no automatic broadcast.
NO_ADAPTIVE = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}
