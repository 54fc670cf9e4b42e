"""broker.producer_ids: ids never repeat across restarts, crashes and a lost file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tidelog.broker.producer_ids import (
    PRODUCER_IDS_FILE,
    ProducerIdManager,
    ProducerIdsError,
    read_next_block_start,
)


def test_blocks_are_reserved_before_use_and_resume_after_restart(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, block_size=10)
    manager.load()
    assert [manager.generate_producer_id_blocking() for _ in range(3)] == [0, 1, 2]
    assert (tmp_path / PRODUCER_IDS_FILE).read_text() == "0\n10\n"
    # a crash (no stop) after 3 ids: the restart skips the rest of the block
    again = ProducerIdManager(tmp_path, block_size=10)
    again.load()
    assert again.generate_producer_id_blocking() == 10
    ids = [again.generate_producer_id_blocking() for _ in range(15)]
    assert ids == list(range(11, 26))
    assert read_next_block_start(tmp_path / PRODUCER_IDS_FILE) == 30
    assert not (tmp_path / (PRODUCER_IDS_FILE + ".tmp")).exists()


def test_async_callers_share_one_reservation(tmp_path: Path) -> None:
    reservations: list[int] = []

    async def run_blocking(fn, *args):  # type: ignore[no-untyped-def]
        if args:
            reservations.append(args[0])
        await asyncio.sleep(0)
        return fn(*args)

    async def main() -> list[int]:
        manager = ProducerIdManager(tmp_path, block_size=4, run_blocking=run_blocking)
        await manager.start()
        ids = await asyncio.gather(*(manager.generate_producer_id() for _ in range(10)))
        await manager.stop()
        return list(ids)

    ids = asyncio.run(main())
    assert sorted(ids) == list(range(10))
    assert reservations == [0, 4, 8]


def test_ids_stay_above_producers_the_partitions_know(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, seen_producer_ids=lambda: [5, 2041, 7])
    manager.load()
    assert manager.generate_producer_id_blocking() == 2042
    (tmp_path / PRODUCER_IDS_FILE).write_text("0\n5000\n")
    manager = ProducerIdManager(tmp_path, seen_producer_ids=lambda: [5, 2041, 7])
    manager.load()
    assert manager.generate_producer_id_blocking() == 5000


@pytest.mark.parametrize("content", ["", "1\n10\n", "0\nx\n", "0\n-5\n", "0\n1\n2\n"])
def test_a_damaged_file_stops_the_broker(tmp_path: Path, content: str) -> None:
    (tmp_path / PRODUCER_IDS_FILE).write_text(content)
    with pytest.raises(ProducerIdsError):
        ProducerIdManager(tmp_path).load()


def test_not_started(tmp_path: Path) -> None:
    with pytest.raises(ProducerIdsError):
        asyncio.run(ProducerIdManager(tmp_path).generate_producer_id())
