"""tidelog analytics: replay topics into Spark (data source `tidelog`, replay job, report).

`analytics.register(spark)` registers the data source; `analytics.replay.main(argv)` is the
`tidelog replay` job. Importing this package does not import Spark.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the `tidelog` Spark data source on `spark` (a SparkSession)."""
    from tidelog.analytics.source import register as _register

    _register(spark)


__all__ = ["register"]
