"""The Node registry client (``@confluentinc/schemaregistry``) against tidelog's registry.

``scripts/test`` installs it with npm into ``.cache/node-schemaregistry`` (the version pinned
in ``tests/schema_registry/node/package.json``); without node or that install the test skips
with a line saying which."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.schema_registry.conftest import Registry

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "node" / "client.js"


def _modules() -> Path:
    cache = Path(os.environ.get("NODE_DEPS_CACHE", ROOT / ".cache" / "node-schemaregistry"))
    return cache / "node_modules"


def test_node_client(registry: Registry) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (apt-get install nodejs): the Node client test skips")
    modules = _modules()
    if not (modules / "@confluentinc" / "schemaregistry").is_dir():
        pytest.skip(f"@confluentinc/schemaregistry is not installed in {modules}: run scripts/test")
    done = subprocess.run(
        [node, str(SCRIPT), registry.url],
        env=dict(os.environ, NODE_PATH=str(modules)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["id"] == 1 and seen["latest"] == 1
    assert seen["subjects"] == ["node-value"]
    assert seen["compatible"] is False
    assert seen["conflict"] == {"status": 409, "errorCode": 409}
    assert seen["missing"] == {"status": 404, "errorCode": 40403}
    assert seen["magic"] == 0 and seen["roundtrip"] == {"a": 42}
    assert seen["deleted"] == [1] and seen["purged"] == [1]
