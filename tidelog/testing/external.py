"""``ExternalBroker``: a broker someone else runs (``--tidelog-broker=HOST:PORT``; any Kafka).

It has the broker object's interface for what makes sense from outside: ``bootstrap_servers``,
``create_topic`` and ``delete_topic`` (CreateTopics, DeleteTopics over the wire) and
``log_text()`` (empty). ``log_dir`` is None;
``stop()``, ``kill()`` and ``restart()`` raise, since this process does not own the broker:
tests that need them should use ``tidelog_broker_factory``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn, Self

from tidelog.testing._common import ContextManagerMixin, TopicAdmin

__all__ = ("ExternalBroker",)


class ExternalBroker(ContextManagerMixin):
    def __init__(self, bootstrap_servers: str) -> None:
        host, sep, port = bootstrap_servers.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(
                f"--tidelog-broker wants HOST:PORT (like 127.0.0.1:9092), not {bootstrap_servers!r}"
            )
        self.host = host
        self.port = int(port)
        self._admin = TopicAdmin()

    @property
    def running(self) -> bool:
        return True

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path | None:
        return None

    def start(self) -> Self:
        return self

    def _not_ours(self, what: str) -> NoReturn:
        raise RuntimeError(
            f"cannot {what} the broker at {self.bootstrap_servers}: it was given with "
            "--tidelog-broker and is not run by this process (use tidelog_broker_factory)"
        )

    def stop(self, timeout_s: float | None = None) -> int | None:
        self._not_ours("stop")

    def kill(self) -> None:
        self._not_ours("kill")

    def restart(self, overrides: Mapping[str, object] | None = None) -> Self:
        self._not_ours("restart")

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, object] | None = None
    ) -> str:
        return self._admin.create_topic(self.bootstrap_servers, name, partitions, config)

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` (DeleteTopics over the wire): the plugin removes its per-test
        topics from a broker it does not own (unless ``--tidelog-keep``)."""
        self._admin.delete_topic(self.bootstrap_servers, name)

    def log_text(self) -> str:
        return ""

    def close(self) -> None:
        self._admin.close()

    def __repr__(self) -> str:
        return f"<tidelog.testing.ExternalBroker {self.bootstrap_servers}>"
