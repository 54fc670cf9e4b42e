"""What every broker object of ``tidelog.testing`` shares.

The interface (``BrokerLike``): ``bootstrap_servers`` ("127.0.0.1:PORT"), ``log_dir``,
``start()``, ``stop()``, ``kill()``, ``restart()``, ``create_topic(name, partitions=1,
config=None)``, ``log_text()``, and use as a context manager (``with ... as b:`` starts the
broker if needed and stops it, removing a temporary log dir, on exit).

Topics are created over the wire (CreateTopics through kafka-python's admin client), so
``create_topic`` works the same against any Kafka broker.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

__all__ = (
    "BrokerFiles",
    "BrokerLike",
    "LocalBroker",
    "TopicAdmin",
    "local_settings",
    "settings_list",
    "unique_topic_name",
)

#: Kafka's legal topic characters; everything else in a test name becomes ``-``.
_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]+")
#: Kafka's limit is 249 characters; keep names short enough to read in a listing.
_MAX_STEM = 80


def unique_topic_name(stem: str) -> str:
    """``stem`` made legal for Kafka plus a random suffix: ``test_send-3f9a1c2e``."""
    cleaned = _ILLEGAL.sub("-", stem).strip("-_")[:_MAX_STEM] or "topic"
    return f"{cleaned}-{uuid.uuid4().hex[:8]}"


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def settings_list(settings: Mapping[str, object] | None) -> list[str]:
    """``{"num.partitions": 3}`` -> ``["num.partitions=3"]`` (booleans as Kafka writes them)."""
    return [f"{key}={_text(value)}" for key, value in (settings or {}).items()]


def local_settings(
    host: str, port: int, log_dir: Path, overrides: Mapping[str, object]
) -> list[str]:
    """The settings a broker of this process starts with: its 127.0.0.1 listener and its log
    dir, then the user's ``overrides`` (which may change either)."""
    return settings_list(
        {"listeners": f"PLAINTEXT://{host}:{port}", "log.dirs": str(log_dir), **overrides}
    )


class BrokerFiles:
    """Where a broker started by this process keeps its things: ``work_dir`` (a new temporary
    directory), ``log_file`` in it (what the broker logs, all starts appended) and ``log_dir``
    (the one given, or ``work_dir/data``)."""

    def __init__(self, log_dir: str | os.PathLike[str] | None, keep: bool) -> None:
        self.keep = keep
        self.work_dir = Path(tempfile.mkdtemp(prefix="tidelog-"))
        self.log_file = self.work_dir / "broker.log"
        self.own_log_dir = log_dir is None
        self.log_dir = Path(log_dir).resolve() if log_dir is not None else self.work_dir / "data"

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def remove(self) -> None:
        """Unless ``keep``: remove the work dir, with the log dir when it is the temporary one
        (a log dir the user gave stays; only the broker's log file next to it goes)."""
        if self.keep:
            return
        if self.own_log_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            return
        self.log_file.unlink(missing_ok=True)
        try:
            self.work_dir.rmdir()
        except OSError:
            pass


class BrokerLike(Protocol):
    """The broker object the fixtures hand out (subprocess, embedded or an existing broker)."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def log_dir(self) -> Path | None: ...

    def start(self) -> Self: ...

    def stop(self) -> int | None: ...

    def kill(self) -> None: ...

    def restart(self, overrides: Mapping[str, object] | None = None) -> Self: ...

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, object] | None = None
    ) -> str: ...

    def log_text(self) -> str: ...


class TopicAdmin:
    """CreateTopics over the wire for one bootstrap address; one admin client, made on first
    use and made again after a failure (the broker may have restarted on the same port)."""

    def __init__(self) -> None:
        self._client: Any = None
        self._bootstrap = ""
        self._lock = threading.Lock()

    def create_topic(
        self,
        bootstrap_servers: str,
        name: str,
        partitions: int = 1,
        config: Mapping[str, object] | None = None,
    ) -> str:
        from kafka.admin import NewTopic

        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=1,
            topic_configs={k: _text(v) for k, v in (config or {}).items()},
        )
        with self._lock:
            for attempt in (1, 2):
                client = self._get(bootstrap_servers)
                try:
                    client.create_topics([topic], timeout_ms=30_000)
                    return name
                except Exception as exc:
                    if type(exc).__name__ in ("TopicAlreadyExistsError",) or attempt == 2:
                        raise
                    self._close_locked()  # a stale connection: try once with a new client
        return name  # pragma: no cover - the loop returns or raises

    def delete_topic(self, bootstrap_servers: str, name: str) -> None:
        """DeleteTopics over the wire; a topic that is already gone is no error."""
        with self._lock:
            client = self._get(bootstrap_servers)
            try:
                client.delete_topics([name], timeout_ms=30_000)
            except Exception as exc:
                if type(exc).__name__ != "UnknownTopicOrPartitionError":
                    raise

    def _get(self, bootstrap_servers: str) -> Any:
        if self._client is None or self._bootstrap != bootstrap_servers:
            self._close_locked()
            from kafka.admin import KafkaAdminClient

            self._client = KafkaAdminClient(
                bootstrap_servers=bootstrap_servers,
                client_id="tidelog-testing",
                request_timeout_ms=30_000,
            )
            self._bootstrap = bootstrap_servers
        return self._client

    def _close_locked(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:
                pass

    def close(self) -> None:
        with self._lock:
            self._close_locked()


class ContextManagerMixin:
    """``with broker:`` starts it if needed and ``close()``s it on exit."""

    @property
    def running(self) -> bool:
        raise NotImplementedError

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()


class LocalBroker(ContextManagerMixin):
    """What the two brokers this process runs share (the subprocess ``Broker`` and the
    in-process ``EmbeddedBroker``): the 127.0.0.1 address, the files (``BrokerFiles``), the
    settings, ``restart``, ``create_topic``, ``log_text`` and ``close``. Each brings ``start``,
    ``stop``, ``kill`` and ``running``; ``_released`` is called when ``close`` has stopped it."""

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None,
        overrides: Mapping[str, object] | None,
        *,
        port: int,
        keep: bool,
        start_timeout_s: float,
        stop_timeout_s: float,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port
        self.overrides: dict[str, object] = dict(overrides or {})
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._files = BrokerFiles(log_dir, keep)
        #: Where what the broker logs goes (all starts, appended).
        self.work_dir, self.log_file = self._files.work_dir, self._files.log_file
        self.starts = 0
        self._admin = TopicAdmin()
        self._closed = False

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` for a client's ``bootstrap_servers``."""
        if not self.port:
            raise RuntimeError("the broker has not been started yet")
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        """The broker's ``log.dirs`` (its data: topics, segments, checkpoints)."""
        return self._files.log_dir

    @property
    def keep(self) -> bool:
        """Whether ``close()`` leaves the temporary files in place."""
        return self._files.keep

    @keep.setter
    def keep(self, value: bool) -> None:
        self._files.keep = value

    def settings(self) -> list[str]:
        """``key=value`` settings of the next start: listener, log dir, then ``overrides``."""
        return local_settings(self.host, self.port, self._files.log_dir, self.overrides)

    def stop(self, timeout_s: float | None = None) -> int | None:
        raise NotImplementedError

    def _check_startable(self) -> None:
        if self._closed:
            raise RuntimeError("this broker was closed")
        if self.running:
            raise RuntimeError(f"the broker at {self.bootstrap_servers} is already running")

    def restart(self, overrides: Mapping[str, object] | None = None) -> Self:
        """Stop (gracefully, if it still runs), then start on the same port and log dir;
        ``overrides`` are merged into the current ones."""
        if self.running:
            self.stop()
        if overrides is not None:
            self.overrides.update(overrides)
        return self.start()

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, object] | None = None
    ) -> str:
        """Create ``name`` over the wire (CreateTopics); returns the name."""
        return self._admin.create_topic(self.bootstrap_servers, name, partitions, config)

    def log_text(self) -> str:
        """Everything the broker logged, over all its starts."""
        return self._files.log_text()

    def close(self) -> None:
        """Stop the broker if it runs; remove the temporary files unless ``keep``."""
        if self._closed:
            return
        self._closed = True
        self._admin.close()
        try:
            if self.running:
                self.stop()
        finally:
            self._released()
            self._files.remove()

    def _released(self) -> None:
        """Called by ``close`` once the broker is stopped, before the files go."""

    def _state(self) -> str:
        state = "running" if self.running else "stopped"
        where = f"{self.host}:{self.port}" if self.port else "not started"
        return f"{where} {state} log_dir={self._files.log_dir}"
