"""The server and router against a real broker, with exact frames (tests/support/kafka_wire.py).

Framing, in-order pipelined answers, connection-closing rules, ApiVersions (incl. KIP-511 and
librdkafka 2.0.2's tagged-field limits) and the advertised version ranges.
"""

from __future__ import annotations

import socket
import struct
import time

from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsRequestV4
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12

from tests.support.kafka_wire import WireClient

# Produce is listed from v0 as Kafka 4 lists it (KAFKA-18659); v0-2 are refused when used.
EXPECTED_RANGES = {0: (0, 12), 1: (4, 16), 2: (1, 8), 3: (0, 13), 18: (0, 4), 19: (2, 7)}


def _metadata_v12() -> MetadataRequestV12:
    return MetadataRequestV12(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def test_api_versions_lists_the_data_path_ranges(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        for request in (
            ApiVersionsRequestV0(),
            ApiVersionsRequestV3(client_software_name="t", client_software_version="1"),
            ApiVersionsRequestV4(client_software_name="t", client_software_version="1"),
        ):
            response = c.request(request)
            assert response.error_code == ErrorCode.none
            ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            for api_key, expected in EXPECTED_RANGES.items():
                assert ranges[api_key] == expected


def test_api_versions_v3_answer_has_no_tagged_fields(broker) -> None:
    """librdkafka 2.0.2 (kcat) cannot read extra tagged fields at the end of this answer."""
    with WireClient(broker.bootstrap) as c:
        c.send(ApiVersionsRequestV3(client_software_name="t", client_software_version="1"))
        frame = c.receive_frame()
    assert frame[-1] == 0  # the top-level tagged-field count is zero
    # v0 response header: correlation id only, then error code 0
    assert struct.unpack_from(">ih", frame, 0)[1] == 0


def test_api_versions_of_unknown_version_gets_kip511_answer(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        body = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\x00" + b"garbage-v99"
        c.send_raw(struct.pack(">i", len(body)) + body)
        frame = c.receive_frame()
        cid, error, count, api_key, lo, hi = struct.unpack(">ihihhh", frame)
        assert (cid, error, count) == (7, ErrorCode.unsupported_version, 1)
        assert (api_key, lo, hi) == (18, 0, 4)
        # The connection stays usable: the client retries with a version we know.
        assert c.request(ApiVersionsRequestV0()).error_code == ErrorCode.none


def test_pipelined_requests_are_answered_in_order(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        ids = [c.send(_metadata_v12()) for _ in range(50)]
        ids += [c.send(ApiVersionsRequestV0()) for _ in range(50)]
        got = [c.receive()[0] for _ in ids]
    assert got == ids


def test_unsupported_version_of_known_api_closes_only_that_connection(broker) -> None:
    with WireClient(broker.bootstrap) as bad, WireClient(broker.bootstrap) as good:
        body = struct.pack(">hhih", 3, 99, 1, -1)
        bad.send_raw(struct.pack(">i", len(body)) + body)
        assert bad.is_closed()
        assert good.request(_metadata_v12()).brokers[0].port == broker.port


def test_garbage_frame_closes_only_its_connection(broker) -> None:
    with WireClient(broker.bootstrap) as bad, WireClient(broker.bootstrap) as good:
        good.request(ApiVersionsRequestV0())
        bad.send_raw(struct.pack(">i", 9) + b"\x00\x03\x00\x0c\xff\xff\xff\xff\x7f")
        assert bad.is_closed()
        assert good.request(_metadata_v12()).controller_id == 1
    assert "closing connection" in broker.log_text()


def test_unknown_api_key_closes_the_connection(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        body = struct.pack(">hhih", 999, 0, 1, -1)
        c.send_raw(struct.pack(">i", len(body)) + body)
        assert c.is_closed()


def test_size_prefix_over_socket_request_max_bytes_closes_before_buffering(broker_factory) -> None:
    b = broker_factory({"socket.request.max.bytes": "1000"})
    with WireClient(b.bootstrap) as c:
        c.send_raw(struct.pack(">i", 1001))  # only the prefix: the broker must not wait
        assert c.is_closed(timeout=5)
    with WireClient(b.bootstrap) as c:
        c.send_raw(struct.pack(">i", -5))
        assert c.is_closed(timeout=5)
    with WireClient(b.bootstrap) as c:  # a request within the limit still works
        assert c.request(ApiVersionsRequestV0()).error_code == ErrorCode.none
    assert "socket.request.max.bytes" in b.log_text()


def test_request_split_across_many_tcp_segments(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        c._sent[5] = (18, 0)
        from tests.support.kafka_wire import encode_request

        data = encode_request(ApiVersionsRequestV0(), 5)
        for i in range(len(data)):
            c.send_raw(data[i : i + 1])
            time.sleep(0.001)
        cid, response = c.receive()
        assert cid == 5 and response.error_code == ErrorCode.none


def test_client_half_close_still_gets_its_answers(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        ids = [c.send(ApiVersionsRequestV0()) for _ in range(3)]
        c.sock.shutdown(socket.SHUT_WR)
        assert [c.receive()[0] for _ in ids] == ids


def test_random_frames_never_hurt_the_broker(broker) -> None:
    """Seeded random bodies behind valid headers of every served API: each costs at most its
    own connection, no handler crashes, and the broker keeps serving."""
    import random

    rng = random.Random(20261121)
    apis = [(0, 3, 10), (1, 4, 16), (2, 1, 8), (3, 0, 13), (18, 0, 4), (19, 2, 7)]
    for _ in range(120):
        api_key, lo, hi = rng.choice(apis)
        version = rng.randint(lo, hi)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        header = struct.pack(">hhih", api_key, version, 1, 1) + b"x"
        if version >= {0: 9, 1: 12, 2: 6, 3: 9, 18: 3, 19: 5}[api_key]:
            header += b"\x00"  # request header v2: empty tagged fields
        frame = header + body
        probe = struct.pack(">hhih", 18, 0, 99, -1)  # ApiVersions v0, correlation id 99
        with socket.create_connection((broker.host, broker.port), timeout=10) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame + struct.pack(">i", 10) + probe)
            # Either the broker closes the connection (bad frame), or it answers both.
            data = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionError:
                    break
                if not chunk:
                    break
                data += chunk
                frames, pos = [], 0
                while len(data) - pos >= 4:
                    (size,) = struct.unpack_from(">i", data, pos)
                    if len(data) - pos - 4 < size:
                        break
                    frames.append(data[pos + 4 : pos + 8])
                    pos += 4 + size
                if struct.pack(">i", 99) in frames:
                    break
    with WireClient(broker.bootstrap) as c:
        assert c.request(_metadata_v12()).controller_id == 1
    assert "Traceback" not in broker.log_text(), broker.log_text()[-3000:]
