"""A faust-streaming application as its users write one: an agent counts words into a table
(kept in memory, backed by its changelog topic) and sends each running count on.

Run as faust's users do: ``python faust_app.py worker`` with ``FAUST_BROKER`` (``host:port``),
``FAUST_APP_ID`` and ``FAUST_DATA_DIR`` in the environment (tests/stream_processing/test_faust.py
starts it against a tidelog broker and restarts it).
"""

from __future__ import annotations

import os

import faust

app = faust.App(
    os.environ.get("FAUST_APP_ID", "wordcount"),
    broker=f"kafka://{os.environ['FAUST_BROKER']}",
    store="memory://",  # the table lives only in memory: a restart restores it from the changelog
    datadir=os.environ.get("FAUST_DATA_DIR", "faust-data"),
    topic_partitions=1,
    topic_replication_factor=1,
    web_enabled=False,
    producer_acks=-1,
    # a SIGKILLed worker's member leaves the group at its session timeout (faust's default: 60 s)
    broker_session_timeout=10.0,
    broker_heartbeat_interval=1.0,
)
words = app.topic("fa-words", key_type=str, value_type=str, partitions=1)
counts_out = app.topic("fa-counts", key_type=str, value_type=int, partitions=1)
counts = app.Table("word-counts", default=int, partitions=1)


@app.agent(words)
async def count(stream: faust.StreamT[str]) -> None:
    async for word in stream:
        counts[word] += 1
        await counts_out.send(key=word, value=counts[word])


if __name__ == "__main__":
    app.main()
