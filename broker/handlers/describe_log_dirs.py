"""DescribeLogDirs (key 35) v1-4: each log dir with the size of every partition in it.

What ``kafka-log-dirs.sh --describe`` prints. Per log dir (``log.dirs``, absolute paths): the
partitions it holds (all, or those asked for; partitions tidelog does not have are left out, as
Kafka leaves out replicas it does not host), each with its size in bytes (the sum of its segment
files, Kafka's ``UnifiedLog.size``), offset lag 0 (a leader has none) and ``is_future_key`` false
(no replica moves between dirs); v4 adds the file system's total and usable bytes. Kafka 4
serves v1-4 (v0 was removed by KIP-896).
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_log_dirs.v1.request import (
        DescribeLogDirsRequest as _DescribeLogDirsRequestV1,
    )
    from kio.schema.describe_log_dirs.v2.request import (
        DescribeLogDirsRequest as _DescribeLogDirsRequestV2,
    )
    from kio.schema.describe_log_dirs.v3.request import (
        DescribeLogDirsRequest as _DescribeLogDirsRequestV3,
    )
    from kio.schema.describe_log_dirs.v4.request import (
        DescribeLogDirsRequest as _DescribeLogDirsRequestV4,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _DescribeLogDirsRequestV1
        | _DescribeLogDirsRequestV2
        | _DescribeLogDirsRequestV3
        | _DescribeLogDirsRequestV4
    )
    from kio.schema.describe_log_dirs.v1.response import (
        DescribeLogDirsResponse as _DescribeLogDirsResponseV1,
    )
    from kio.schema.describe_log_dirs.v2.response import (
        DescribeLogDirsResponse as _DescribeLogDirsResponseV2,
    )
    from kio.schema.describe_log_dirs.v3.response import (
        DescribeLogDirsResponse as _DescribeLogDirsResponseV3,
    )
    from kio.schema.describe_log_dirs.v4.response import (
        DescribeLogDirsResponse as _DescribeLogDirsResponseV4,
    )

    #: The response versions it answers (kio's classes).
    Response = (
        _DescribeLogDirsResponseV1
        | _DescribeLogDirsResponseV2
        | _DescribeLogDirsResponseV3
        | _DescribeLogDirsResponseV4
    )


API_KEY = 35


def _wanted(ctx: RequestContext, request: Request) -> dict[str, set[int] | None]:
    """topic -> partitions asked for (None: all of them)."""
    if request.topics is None:
        return {info.name: None for info in ctx.broker.topics}
    out: dict[str, set[int] | None] = {}
    for t in request.topics:
        parts = out.get(t.topic)
        out[t.topic] = (parts or set()) | {int(p) for p in t.partitions}
    return out


def _disk_usage(path: Path) -> tuple[int, int]:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1, -1
    return usage.total, usage.free


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    broker = ctx.broker
    manager = broker.log_manager
    by_dir: dict[Path, dict[str, list[Any]]] = {Path(d): {} for d in manager.log_dirs}
    for topic, partitions in sorted(_wanted(ctx, request).items()):
        info = broker.topics.get(topic)
        if info is None:
            continue
        for index in sorted(range(info.partitions) if partitions is None else partitions):
            partition_log = broker.topics.get_log(topic, index)
            log_dir = manager.log_dir_of(topic, index)
            if partition_log is None or log_dir is None:
                continue
            by_dir.setdefault(Path(log_dir), {}).setdefault(topic, []).append(
                build(
                    types.DescribeLogDirsPartition,
                    partition_index=index,
                    partition_size=partition_log.size_in_bytes,
                    offset_lag=0,
                    is_future_key=False,
                )
            )
    results = []
    for log_dir, topics in by_dir.items():
        total, usable = await broker.run_blocking(_disk_usage, log_dir)
        results.append(
            build(
                types.DescribeLogDirsResult,
                error_code=ErrorCode.none,
                log_dir=str(log_dir.resolve()),
                topics=tuple(
                    build(types.DescribeLogDirsTopic, name=name, partitions=tuple(parts))
                    for name, parts in topics.items()
                ),
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return cast(
        "Response",
        build(
            types.DescribeLogDirsResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.none,
            results=tuple(results),
        ),
    )


SPEC = HandlerSpec(
    api_key=API_KEY, name="DescribeLogDirs", min_version=1, max_version=4, handle=handle
)
