"""A real broker with its Schema Registry on (``schema.registry.listeners``) on free ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import BrokerFactory
from tests.support.broker_process import BrokerProcess
from tests.support.net import free_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class Registry:
    broker: BrokerProcess
    url: str

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> requests.Response:
        return requests.request(
            method,
            self.url + path,
            json=body,
            params=params or None,
            headers={"Content-Type": CONTENT_TYPE},
            timeout=30,
        )

    def ok(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        response = self.call(method, path, body, **params)
        assert response.status_code == 200, response.text
        return response.json()

    def error(self, method: str, path: str, body: Any = None, **params: Any) -> tuple[int, int]:
        """(HTTP status, error_code) of an answer that must be an error."""
        response = self.call(method, path, body, **params)
        assert response.status_code >= 400, response.text
        data = response.json()
        assert isinstance(data["message"], str) and data["message"]
        return response.status_code, data["error_code"]


def registry_overrides(port: int) -> dict[str, str]:
    return {"schema.registry.listeners": f"http://127.0.0.1:{port}"}


def start_registry(factory: Callable[..., BrokerProcess]) -> Registry:
    port = free_port()
    broker = factory(registry_overrides(port))
    return Registry(broker, f"http://127.0.0.1:{port}")


@pytest.fixture
def registry(broker_factory: BrokerFactory) -> Registry:
    """A fresh broker with its registry (stopped with SIGTERM at tear-down, must exit 0)."""
    return start_registry(broker_factory)


@pytest.fixture(scope="module")
def module_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """One broker and registry for a module's tests (use distinct subject names)."""
    port = free_port()
    log_dir: Path = tmp_path_factory.mktemp("registry") / "data"
    log_dir.mkdir()
    broker = BrokerProcess(log_dir, registry_overrides(port)).start()
    yield Registry(broker, f"http://127.0.0.1:{port}")
    code = broker.stop()
    assert code == 0, broker.log_text()[-3000:]
