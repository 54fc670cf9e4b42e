"""Real clients whose produce answers get lost: they retry, and nothing is written twice.

A TCP proxy sits between the client and the broker (the broker advertises the proxy's port, so
every connection goes through it). It forwards every request, but for every Nth Produce request
it swallows the broker's answer and cuts the connection: the batch *was* written, the client
does not know, and resends it (with everything else that was in flight) on a new connection.
The idempotent producer's retries must be recognised as duplicates by the broker, so the
partition ends up with every message exactly once, in order.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import pytest
from kafka import KafkaProducer

from tests.integration.test_idempotence import consume_all, logged_batches
from tests.support.fault_wire import create_topic_at
from tests.support.kafka_wire import read_frame

pytestmark = pytest.mark.integration

PRODUCE = 0


class AnswerDroppingProxy:
    """Forwards Kafka frames; drops the answer to every ``drop_every``-th Produce request."""

    def __init__(self, drop_every: int) -> None:
        self.drop_every = drop_every
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.upstream_port = 0
        self.produce_requests = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._to_drop: set[tuple[int, int]] = set()
        self._connections = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._connections += 1
                conn_id = self._connections
            threading.Thread(
                target=self._requests, args=(conn_id, client, upstream), daemon=True
            ).start()
            threading.Thread(
                target=self._answers, args=(conn_id, client, upstream), daemon=True
            ).start()

    @staticmethod
    def _frame(sock: socket.socket) -> bytes | None:
        try:
            body = read_frame(sock)
        except OSError:  # closed or reset: the proxied connection is over
            return None
        return struct.pack(">i", len(body)) + body

    def _requests(self, conn_id: int, client: socket.socket, upstream: socket.socket) -> None:
        while (frame := self._frame(client)) is not None:
            api_key, _, correlation = struct.unpack_from(">hhi", frame, 4)
            if api_key == PRODUCE:
                with self._lock:
                    self.produce_requests += 1
                    if self.produce_requests % self.drop_every == 0:
                        self._to_drop.add((conn_id, correlation))
            try:
                upstream.sendall(frame)
            except OSError:
                break
        _close(client, upstream)

    def _answers(self, conn_id: int, client: socket.socket, upstream: socket.socket) -> None:
        while (frame := self._frame(upstream)) is not None:
            (correlation,) = struct.unpack_from(">i", frame, 4)
            with self._lock:
                drop = (conn_id, correlation) in self._to_drop
                if drop:
                    self.dropped += 1
            if drop:
                break
            try:
                client.sendall(frame)
            except OSError:
                break
        _close(client, upstream)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


@pytest.fixture
def proxied_broker(broker_factory: Any) -> Any:
    proxy = AnswerDroppingProxy(drop_every=7)
    broker = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.upstream_port = broker.port
    broker.proxy = proxy
    broker.proxy_bootstrap = f"127.0.0.1:{proxy.port}"
    yield broker
    proxy.close()


def test_kafka_python_retries_after_lost_answers(proxied_broker: Any) -> None:
    broker = proxied_broker
    topic = "kp-lost-answers"
    create_topic_at(broker.bootstrap, topic)
    producer = KafkaProducer(
        bootstrap_servers=broker.proxy_bootstrap,
        linger_ms=2,
        batch_size=2048,
        reconnect_backoff_ms=20,
        retry_backoff_ms=20,
    )
    sent = [b"kp-%05d" % i for i in range(4000)]
    futures = [producer.send(topic, value=v, partition=0) for v in sent]
    producer.flush(60)
    producer.close()
    offsets = [f.get(timeout=1).offset for f in futures]
    assert broker.proxy.dropped > 0, "no answer was dropped: the test proved nothing"
    assert offsets == list(range(len(sent)))  # each message got its own, unique offset
    assert consume_all(broker.bootstrap, topic, len(sent)) == sent
    assert all(h.producer_id >= 0 for h in logged_batches(broker.log_dir, topic))


def test_confluent_kafka_retries_after_lost_answers(proxied_broker: Any) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = proxied_broker
    topic = "ck-lost-answers"
    create_topic_at(broker.bootstrap, topic)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.proxy_bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.size": 2048,
            "reconnect.backoff.ms": 20,
            "retry.backoff.ms": 20,
        }
    )
    errors: list[Any] = []
    offsets: dict[bytes, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets[msg.value()] = msg.offset()

    sent = [b"ck-%05d" % i for i in range(4000)]
    for value in sent:
        producer.produce(topic, value=value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors
    assert broker.proxy.dropped > 0, "no answer was dropped: the test proved nothing"
    assert [offsets[v] for v in sent] == list(range(len(sent)))
    assert consume_all(broker.bootstrap, topic, len(sent)) == sent
