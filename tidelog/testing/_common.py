"""What every broker object of ``tidelog.testing`` shares.

The interface (``BrokerLike``): ``bootstrap_servers`` ("127.0.0.1:PORT"), ``log_dir``,
``start()``, ``stop()``, ``kill()``, ``restart()``, ``create_topic(name, partitions=1,
config=None)``, ``log_text()``, and use as a context manager (``with ... as b:`` starts the
broker if needed and stops it, removing a temporary log dir, on exit).

Topics are created over the wire (CreateTopics through kafka-python's admin client), so
``create_topic`` works the same against any Kafka broker.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

__all__ = ("BrokerLike", "TopicAdmin", "settings_list", "unique_topic_name")

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
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
