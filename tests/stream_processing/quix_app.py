"""A quixstreams application as its users write one: the sum of each key's readings per
one-second tumbling window (event time), emitted once when the window closes, exactly once.

Its window state lives in RocksDB under ``QUIX_STATE_DIR``, backed by a changelog topic that
quixstreams creates. Run as its users do: ``python quix_app.py`` with ``QUIX_BROKER``
(``host:port``) and ``QUIX_STATE_DIR`` in the environment
(tests/stream_processing/test_quixstreams.py starts it against a tidelog broker, SIGKILLs it
mid-run and starts it again on an empty state dir).
"""

from __future__ import annotations

import os

from quixstreams import Application

app = Application(
    broker_address=os.environ["QUIX_BROKER"],
    consumer_group="qx-window-sums",
    processing_guarantee="exactly-once",
    auto_offset_reset="earliest",
    state_dir=os.environ["QUIX_STATE_DIR"],
    commit_interval=0.5,
    # One stable transactional id per instance: a restarted instance fences the one it replaces
    # (and aborts its open transaction) at once; quixstreams' default is a random id per run.
    producer_extra_config={"transactional.id": "qx-window-sums-0"},
    # a SIGKILLed instance's member leaves the group at its session timeout (librdkafka: 45 s)
    consumer_extra_config={"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000},
)
readings = app.topic("qx-readings", key_deserializer="str", value_deserializer="json")
sums = app.topic("qx-window-sums", key_serializer="str", value_serializer="json")

sdf = app.dataframe(readings)
sdf = sdf.apply(lambda reading: reading["n"])
sdf = sdf.tumbling_window(duration_ms=1000).sum().final(closing_strategy="partition")
sdf = sdf.to_topic(sums)

if __name__ == "__main__":
    app.run()
