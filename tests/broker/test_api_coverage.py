"""Every API key Kafka 4 defines: served (advertised with the handler's range, listed in the
docs/apis.md's table) or refused on purpose, with the answer Kafka gives for an API its listener
does not enable - the connection is closed (SocketServer: "Received request api key N ... which
is not enabled"). Keeps ApiVersions and docs/apis.md honest.
"""

from __future__ import annotations

import re
import socket
import struct
from pathlib import Path
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.index import api_key_map

from tests.support.kafka_wire import WireClient
from tidelog.broker.router import discover_handlers

APIS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "apis.md"

#: The API keys of Kafka 4.1 (``ApiKeys``; kio's schema index is generated from the same JSON).
KAFKA4_API_KEYS = sorted(api_key_map)

#: Keys tidelog does not serve, and why. The reason is what docs/apis.md's table says.
REFUSED: dict[int, str] = {
    34: "one log dir per partition, no moves between dirs",
    38: "delegation tokens: not supported",
    39: "delegation tokens: not supported",
    40: "delegation tokens: not supported",
    41: "delegation tokens: not supported",
    52: "KRaft quorum (controller only)",
    53: "KRaft quorum (controller only)",
    54: "KRaft quorum (controller only)",
    55: "KRaft quorum: no quorum on one node",
    56: "inter-broker (controller only)",
    57: "feature flags: not supported",
    58: "inter-broker (controller only)",
    59: "KRaft quorum (controller only)",
    62: "inter-broker (controller only)",
    63: "inter-broker (controller only)",
    64: "KRaft: no broker registration on one node",
    67: "inter-broker (controller only)",
    70: "inter-broker (controller only)",
    71: "client telemetry (KIP-714): not supported",
    72: "client telemetry (KIP-714): not supported",
    73: "inter-broker (controller only)",
    74: "client metrics resources: not supported",
    80: "KRaft quorum (controller only)",
    81: "KRaft quorum (controller only)",
    82: "KRaft quorum (controller only)",
    83: "share group state (inter-broker)",
    84: "share group state (inter-broker)",
    85: "share group state (inter-broker)",
    86: "share group state (inter-broker)",
    87: "share group state (inter-broker)",
}


def _advertised(broker: Any) -> dict[int, tuple[int, int]]:
    with WireClient(broker.bootstrap) as client:
        answer = client.request(
            ApiVersionsRequest(client_software_name="coverage", client_software_version="1")
        )
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}


def _readme_rows() -> dict[int, tuple[str, str, str]]:
    rows: dict[int, tuple[str, str, str]] = {}
    for line in APIS_PAGE.read_text().splitlines():
        m = re.match(r"^\| (\d+) \| (\w+) \| ([^|]+) \| ([^|]*) \|$", line)
        if m:
            rows[int(m.group(1))] = (m.group(2), m.group(3).strip(), m.group(4).strip())
    return rows


def test_every_kafka4_api_is_served_or_refused_on_purpose(module_broker: Any) -> None:
    specs, _ = discover_handlers()
    advertised = _advertised(module_broker)
    served = set(specs)
    assert set(advertised) == served, "ApiVersions lists exactly the served APIs"
    assert served | set(REFUSED) == set(KAFKA4_API_KEYS), "every Kafka 4 key has a verdict"
    assert not served & set(REFUSED)
    rows = _readme_rows()
    assert set(rows) == set(KAFKA4_API_KEYS), "docs/apis.md's table lists every Kafka 4 key"
    for key in KAFKA4_API_KEYS:
        name, versions, notes = rows[key]
        if key in served:
            spec = specs[key]
            low = (
                spec.min_version
                if spec.advertised_min_version is None
                else spec.advertised_min_version
            )
            assert advertised[key] == (low, spec.max_version)
            assert (name, versions) == (spec.name, f"{low}-{spec.max_version}"), key
        else:
            assert versions == "refused" and notes == REFUSED[key], key


def test_refused_apis_close_the_connection_as_kafka_does(module_broker: Any) -> None:
    for key in sorted(REFUSED):
        header = struct.pack(">hhih", key, 0, 7, 4) + b"test"
        frame = struct.pack(">i", len(header)) + header
        with socket.create_connection((module_broker.host, module_broker.port), timeout=10) as s:
            s.sendall(frame)
            s.settimeout(10)
            assert s.recv(1) == b"", f"API key {key} was answered"
    # ...and the broker still serves.
    assert _advertised(module_broker)
