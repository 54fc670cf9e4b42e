"""``tidelog serve``: run a broker in this process until SIGTERM or SIGINT.

Its parser is added by ``add_parser`` (the interface every tool of ``tidelog.cli`` has); the
broker code is imported only once the settings are read.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import resource
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from tidelog.cli.arguments import installed_version, lazy_version

log = logging.getLogger("tidelog")

__all__ = ("add_parser", "serve")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the broker",
        description="Run a tidelog broker until SIGTERM or SIGINT. Without --config it runs on "
        "built-in defaults (Kafka's, listening on 127.0.0.1:9092).",
    )
    p.add_argument(
        "--config",
        type=Path,
        help="settings file: YAML, or Java properties such as Kafka's server.properties",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one property (repeatable); wins over the file and TIDELOG_* variables",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)",
    )
    p.add_argument("--version", action=lazy_version(installed_version))
    p.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    """``tidelog serve``: exit 0 after a clean stop, 2 on a bad configuration."""
    # No cyclic collection while the settings and the broker code load either: importing makes
    # ~35,000 long-lived objects and no garbage cycles (``_serve`` turns it back on, frozen).
    gc.disable()
    from tidelog.config import ConfigError, load_broker_config

    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    _keep_test_libraries_out()
    try:
        config = load_broker_config(args.config, args.override)
        from tidelog.broker.app import Broker, open_files_max, raise_open_file_limit

        before, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        soft, hard = raise_open_file_limit()
        log.info(
            "open-file limit (RLIMIT_NOFILE): soft %d (was %d), hard %d; segment files kept "
            "open at most %d (log.open.files.max)",
            soft,
            before,
            hard,
            open_files_max(config.get_int("log.open.files.max")),
        )
        broker = Broker(config)
    except ConfigError as exc:
        gc.enable()
        print(f"tidelog: bad configuration: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        gc.enable()
        from tidelog.broker.security.authorizer import AclFileError
        from tidelog.broker.security.scram import ScramStoreError

        if not isinstance(exc, AclFileError | ScramStoreError):
            raise
        log.error("cannot start: %s", exc)  # a damaged security file in the log dir
        return 1
    return _run(_serve(broker))


def _keep_test_libraries_out() -> None:
    """Stop kio from loading Hypothesis into the broker process.

    kio imports Hypothesis when it is installed (a dev or test environment) to register
    strategies; in a broker that costs ~2 s of start-up and ~200 MB of RSS and serves nothing.
    Marking the module absent makes kio's optional import fail fast.
    """
    if "kio" not in sys.modules:
        sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def _run(coro: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(coro)
    result: int = uvloop.run(coro)
    return result


async def _serve(broker: object) -> int:
    from tidelog.broker.app import Broker

    assert isinstance(broker, Broker)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # No cyclic collection while the logs load: start-up makes ~200 long-lived objects per
    # partition and no garbage cycles, and every collection of the oldest generation walks
    # all of them (20,000 partitions: 1,263 collections, 1.25 s of a 4.3 s load).
    gc.disable()
    try:
        await broker.start()
    except Exception as exc:
        gc.enable()
        # One line naming the cause; ``start`` has already undone what it began.
        log.error("cannot start: %s", _start_failure(exc))
        log.debug("start-up failure", exc_info=True)
        return 1
    _settle_garbage_collector()
    gc.enable()
    log.info("%s", broker.listening_line())
    await stop.wait()
    log.info("stopping (signal received)")
    await broker.stop()
    return 0


def _settle_garbage_collector() -> None:
    """After start-up, move every object alive now (modules, schemas, handlers, the loaded
    logs: ~35,000 objects) to the collector's permanent generation (``gc.freeze``).

    Measured (scripts/bench/RESULTS.md, "The tail of confluent-kafka's synchronous produce"): while
    serving, the cyclic collector runs rarely (4 young collections in 22,000 synchronous produces,
    0.05-0.17 ms each), so it is not what makes the latency tail; but a full collection, when one
    comes, would walk every start-up object again. Frozen, they are never scanned. The
    young-generation threshold stays at Python's 700: a higher one makes each young collection (a
    pause on the loop) longer for fewer of them, which the tail does not want. Done only by
    ``tidelog serve``, which owns its process; an embedded broker leaves its host's collector alone.
    No ``gc.collect()`` first: freezing is a list splice, a collection would add milliseconds to the
    start-up time (with the collector off during start-up, see ``_serve``, nothing walks the
    loaded logs at all).
    """
    gc.freeze()


def _start_failure(exc: BaseException) -> str:
    """The one-line cause of a failed start: storage, file and socket errors say what they
    are; anything else is named by its type (the traceback is logged at DEBUG)."""
    from tidelog.broker.producer_ids import ProducerIdsError
    from tidelog.broker.topics import TopicRegistryError
    from tidelog.storage import StorageError

    if isinstance(exc, StorageError | ProducerIdsError | TopicRegistryError):
        return str(exc)
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{where}" if exc.strerror else str(exc)
    return f"{type(exc).__name__}: {exc} (run with --log-level DEBUG for the traceback)"
