"""``tidelog dump-log``: offline dumps of files written here in Kafka's formats."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import pytest

from tests.tools.tools_fixtures import (
    RunTool,
    legacy_message,
    legacy_wrapper,
    offset_index,
    time_index,
    txn_index,
)
from tidelog.protocol.internal_topics.transaction_state import (
    TxnLogValue,
    encode_txn_key,
    encode_txn_value,
)
from tidelog.storage.producer_snapshot import encode_snapshot
from tidelog.storage.record_codec import NewRecord, encode_batch, encode_control_batch
from tidelog.tools._segment_files import ProducerSnapshotEntry

TS = 1_700_000_000_000


def _v2_segment(tmp_path: Path) -> tuple[Path, list[bytes]]:
    b1 = encode_batch(
        [
            NewRecord(b"abc", b"hello", (), TS),
            NewRecord(None, b"world", (("h1", b"x"), ("h2", None)), TS + 1),
            NewRecord(b"k", None, (), TS + 2),
        ],
        base_offset=0,
        partition_leader_epoch=0,
    )
    b2 = encode_batch(
        [NewRecord(b"k%d" % i, b"v%d" % i, (), TS + 100 + i) for i in range(5)],
        base_offset=3,
        compression="gzip",
        producer_id=1000,
        producer_epoch=2,
        base_sequence=7,
        partition_leader_epoch=0,
    )
    b3 = encode_control_batch(
        1, base_offset=8, producer_id=1000, producer_epoch=2, timestamp=TS + 200,
        partition_leader_epoch=0, coordinator_epoch=5,
    )  # fmt: skip
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b1 + b2 + b3)
    return log, [b1, b2, b3]


def test_v2_batches_shallow(tidelog: RunTool, tmp_path: Path) -> None:
    log, (b1, b2, _b3) = _v2_segment(tmp_path)
    r = tidelog("dump-log", "--files", str(log))
    assert r.code == 0, r.err
    crc1 = struct.unpack_from(">I", b1, 17)[0]
    assert r.lines[0] == f"Dumping {log}"
    assert r.lines[1] == "Log starting offset: 0"
    assert r.lines[2] == (
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 "
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
        f"CreateTime: {TS + 2} size: {len(b1)} magic: 2 compresscodec: none crc: {crc1} "
        "isvalid: true"
    )
    assert (
        f"baseOffset: 3 lastOffset: 7 count: 5 baseSequence: 7 lastSequence: 11 "
        f"producerId: 1000 producerEpoch: 2 partitionLeaderEpoch: 0 isTransactional: false "
        f"isControl: false deleteHorizonMs: OptionalLong.empty position: {len(b1)} "
        f"CreateTime: {TS + 104} size: {len(b2)} magic: 2 compresscodec: gzip"
    ) in r.lines[3]
    assert "isTransactional: true isControl: true" in r.lines[4]
    assert f"position: {len(b1) + len(b2)}" in r.lines[4]
    assert len(r.lines) == 5  # no records without --deep-iteration, no trailing bytes


def test_v2_records_with_print_data_log(tidelog: RunTool, tmp_path: Path) -> None:
    log, _ = _v2_segment(tmp_path)
    r = tidelog("dump-log", "--files", str(log), "--print-data-log")
    assert r.code == 0, r.err
    records = [line for line in r.lines if line.startswith("|")]
    assert records[0] == (
        f"| offset: 0 CreateTime: {TS} keySize: 3 valueSize: 5 sequence: -1 headerKeys: [] "
        "key: abc payload: hello"
    )
    assert records[1] == (
        f"| offset: 1 CreateTime: {TS + 1} keySize: -1 valueSize: 5 sequence: -1 "
        "headerKeys: [h1,h2] payload: world"
    )
    assert records[2].endswith("keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: k")
    assert records[3] == (
        f"| offset: 3 CreateTime: {TS + 100} keySize: 2 valueSize: 2 sequence: 7 headerKeys: [] "
        "key: k0 payload: v0"
    )
    assert "sequence: 11" in records[7]
    assert records[8].endswith("endTxnMarker: COMMIT coordinatorEpoch: 5")
    assert "payload" not in records[8]
    assert r.err == ""  # offsets are consecutive


def test_deep_iteration_without_data_and_skip_metadata(tidelog: RunTool, tmp_path: Path) -> None:
    log, _ = _v2_segment(tmp_path)
    deep = tidelog("dump-log", "--files", str(log), "--deep-iteration")
    assert sum(line.startswith("| offset:") for line in deep.lines) == 9
    assert "payload" not in deep.out
    skip = tidelog("dump-log", "--files", str(log), "--print-data-log", "--skip-record-metadata")
    records = [line for line in skip.lines if line.startswith("|")]
    assert records[0] == "| key: abc payload: hello"
    assert records[1] == "| payload: world"


def test_legacy_v0_v1_and_compressed_wrappers(tidelog: RunTool, tmp_path: Path) -> None:
    data = legacy_message(0, 100, b"key", b"val") + legacy_message(1, 101, None, b"v1", TS)
    data += legacy_wrapper(0, 1, 104, [(b"a", b"1", -1), (b"b", b"2", -1), (None, b"3", -1)])
    data += legacy_wrapper(1, 1, 106, [(b"a", b"1", TS + 1), (b"b", b"2", TS + 2)])
    data += legacy_wrapper(
        1, 2, 108, [(b"c", b"3", TS + 1), (b"d", b"4", TS + 2)],
        wrapper_timestamp=TS + 9, log_append_time=True,
    )  # fmt: skip
    data += legacy_wrapper(1, 3, 110, [(b"e", b"5", TS + 3), (b"f", b"6", TS + 4)])
    log = tmp_path / "00000000000000000100.log"
    log.write_bytes(data)
    r = tidelog("dump-log", "--files", str(log), "--print-data-log")
    assert r.code == 0, r.err
    assert r.lines[1] == "Log starting offset: 100"
    crc0 = zlib.crc32(data[16:32])
    assert r.lines[2] == (
        f"offset: 100 position: 0 NoTimestampType: -1 size: 32 magic: 0 compresscodec: none "
        f"crc: {crc0} isvalid: true"
    )
    assert r.lines[3] == (
        f"| offset: 100 NoTimestampType: -1 keySize: 3 valueSize: 3 isValid: true crc: {crc0} "
        "key: key payload: val"
    )
    assert re.fullmatch(
        rf"offset: 101 position: 32 CreateTime: {TS} size: \d+ magic: 1 compresscodec: none "
        r"crc: \d+ isvalid: true",
        r.lines[4],
    )
    batches = [line for line in r.lines if line.startswith("offset:")]
    assert [b.split()[1] for b in batches] == ["100", "101", "104", "106", "108", "110"]
    assert "magic: 0 compresscodec: gzip" in batches[2]
    assert f"LogAppendTime: {TS + 9}" in batches[4] and "compresscodec: snappy" in batches[4]
    assert "compresscodec: lz4" in batches[5]
    records = [line for line in r.lines if line.startswith("|")]
    offsets = [int(line.split()[2]) for line in records]
    assert offsets == list(range(100, 111))
    assert records[4] == (
        "| offset: 104 NoTimestampType: -1 keySize: -1 valueSize: 1 isValid: true crc: "
        + records[4].split("crc: ")[1]
    )
    assert f"| offset: 107 LogAppendTime: {TS + 9} keySize: 1" in records[7]
    assert all("isValid: true" in line for line in records)
    assert r.err == ""


def test_corrupt_crc_and_trailing_bytes(tidelog: RunTool, tmp_path: Path) -> None:
    log, (b1, _b2, _b3) = _v2_segment(tmp_path)
    data = bytearray(log.read_bytes())
    data[len(b1) + 70] ^= 0xFF  # inside batch 2's records
    log.write_bytes(bytes(data) + b"\x00" * 7)
    r = tidelog("dump-log", "--files", str(log))
    assert r.code == 0
    assert "isvalid: true" in r.lines[2]
    assert "isvalid: false" in r.lines[3]
    assert r.lines[-1] == f"Found 7 invalid bytes at the end of {log.name}"
    limited = tidelog("dump-log", "--files", str(log), "--max-bytes", str(len(b1) + 10))
    assert len([x for x in limited.lines if x.startswith("baseOffset")]) == 1
    assert "invalid bytes" not in limited.out  # Kafka stays quiet when --max-bytes cut it


def test_impossible_size_fails(tidelog: RunTool, tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(struct.pack(">qi", 0, 3) + b"\x00" * 20)
    r = tidelog("dump-log", "--files", str(log))
    assert r.code == 1
    assert "smaller than minimum record overhead (14)" in r.err


def test_offset_and_time_index(tidelog: RunTool, tmp_path: Path) -> None:
    _log, (b1, b2, _b3) = _v2_segment(tmp_path)
    idx = tmp_path / "00000000000000000000.index"
    tidx = tmp_path / "00000000000000000000.timeindex"
    idx.write_bytes(offset_index(0, [(2, 0), (7, len(b1)), (8, len(b1) + len(b2))]))
    tidx.write_bytes(time_index(0, [(TS + 2, 2), (TS + 104, 7)]))
    r = tidelog("dump-log", "--files", f"{idx},{tidx}")
    assert r.code == 0, r.err
    assert r.lines == [
        f"Dumping {idx}",
        "offset: 2 position: 0",
        f"offset: 7 position: {len(b1)}",
        f"offset: 8 position: {len(b1) + len(b2)}",
        f"Dumping {tidx}",
        f"timestamp: {TS + 2} offset: 2",
        f"timestamp: {TS + 104} offset: 7",
    ]
    assert r.err == ""
    ok = tidelog("dump-log", "--files", str(idx), str(tidx), "--index-sanity-check")
    assert ok.lines == [
        f"Dumping {idx}",
        f"{idx} passed sanity check.",
        f"Dumping {tidx}",
        f"{tidx} passed sanity check.",
    ]


def test_index_mismatches_are_reported(tidelog: RunTool, tmp_path: Path) -> None:
    _log, (b1, _b2, _b3) = _v2_segment(tmp_path)
    idx = tmp_path / "00000000000000000000.index"
    tidx = tmp_path / "00000000000000000000.timeindex"
    idx.write_bytes(offset_index(0, [(2, 0), (5, len(b1))]))  # batch at len(b1) ends at 7
    tidx.write_bytes(time_index(0, [(TS + 2, 2), (TS + 999, 7)]))  # wrong timestamp
    r = tidelog("dump-log", "--files", str(idx), str(tidx), "--verify-index-only")
    assert r.code == 1
    assert r.lines == [f"Dumping {idx}", f"Dumping {tidx}"]  # nothing printed per entry
    assert f"Mismatches in :{idx.resolve()}" in r.err
    assert "  Index offset: 5, log offset: 7" in r.err
    assert f"Found timestamp mismatch in :{tidx.resolve()}" in r.err
    assert f"  Index timestamp: {TS + 999}, log timestamp: {TS + 104}" in r.err


def test_index_sanity_failures(tidelog: RunTool, tmp_path: Path) -> None:
    _v2_segment(tmp_path)
    idx = tmp_path / "00000000000000000000.index"
    idx.write_bytes(offset_index(0, [(2, 0)]) + b"\x00\x01\x02")
    r = tidelog("dump-log", "--files", str(idx), "--index-sanity-check")
    assert r.code == 1
    assert "is corrupt, found 11 bytes which is neither positive nor a multiple of 8" in r.err
    tidx = tmp_path / "00000000000000000000.timeindex"
    tidx.write_bytes(time_index(0, [(TS + 5, 2), (TS + 1, 7)]))
    r = tidelog("dump-log", "--files", str(tidx), "--index-sanity-check")
    assert r.code == 1
    assert f"the last timestamp is {TS + 1} which is less than the first timestamp" in r.err


def test_empty_index_and_missing_log(tidelog: RunTool, tmp_path: Path) -> None:
    _v2_segment(tmp_path)
    idx = tmp_path / "00000000000000000000.index"
    idx.write_bytes(b"")
    assert tidelog("dump-log", "--files", str(idx)).lines[1] == f"{idx} is empty."
    lonely = tmp_path / "00000000000000000050.index"
    lonely.write_bytes(offset_index(50, [(51, 0)]))
    r = tidelog("dump-log", "--files", str(lonely))
    assert r.code == 1 and "its log file" in r.err and "is missing" in r.err


def test_producer_snapshot(tidelog: RunTool, tmp_path: Path) -> None:
    entries = [
        ProducerSnapshotEntry(1000, 2, 11, 7, 4, TS + 104, -1, -1),
        ProducerSnapshotEntry(1001, 0, -1, -1, 0, TS, 3, 42),
    ]
    snap = tmp_path / "00000000000000000009.snapshot"
    snap.write_bytes(encode_snapshot(entries))
    r = tidelog("dump-log", "--files", str(snap))
    assert r.code == 0, r.err
    assert r.lines[1:] == [
        f"producerId: 1000 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: "
        f"OptionalLong.empty lastTimestamp: {TS + 104} firstSequence: 7 lastSequence: 11 "
        f"lastOffset: 7 offsetDelta: 4 timestamp: {TS + 104}",
        f"producerId: 1001 producerEpoch: 0 coordinatorEpoch: 3 currentTxnFirstOffset: "
        f"OptionalLong[42] lastTimestamp: {TS}",
    ]
    bad = bytearray(snap.read_bytes())
    bad[-1] ^= 1
    snap.write_bytes(bytes(bad))
    r = tidelog("dump-log", "--files", str(snap))
    assert r.code == 1 and "Snapshot is corrupt (CRC is no longer valid)" in r.err


def test_snapshot_written_by_storage_reads_back(tidelog: RunTool, tmp_path: Path) -> None:
    producer_snapshot = pytest.importorskip("tidelog.storage.producer_snapshot")
    entry = producer_snapshot.SnapshotEntry(77, 1, 4, 10, 4, TS, -1, -1)
    snap = tmp_path / "00000000000000000011.snapshot"
    snap.write_bytes(producer_snapshot.encode_snapshot([entry]))
    r = tidelog("dump-log", "--files", str(snap))
    assert r.code == 0, r.err
    assert "producerId: 77 producerEpoch: 1" in r.out
    assert "firstSequence: 0 lastSequence: 4" in r.out


def test_txn_index_and_unknown_files(tidelog: RunTool, tmp_path: Path) -> None:
    txn = tmp_path / "00000000000000000000.txnindex"
    txn.write_bytes(txn_index([(1000, 3, 9, 9)]))
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n")
    r = tidelog("dump-log", "--files", str(txn), str(other))
    assert r.code == 0
    assert r.lines[1] == (
        "version: 0 producerId: 1000 firstOffset: 3 lastOffset: 9 lastStableOffset: 9"
    )
    assert f"Ignoring unknown file {other}" in r.err


def test_usage_and_missing_file(tidelog: RunTool, tmp_path: Path) -> None:
    assert tidelog("dump-log").code == 2
    r = tidelog("dump-log", "--files", str(tmp_path / "00000000000000000000.log"))
    assert r.code == 1 and "no such file" in r.err
    help_text = tidelog("dump-log", "--help")
    assert help_text.code == 0 and "examples:" in help_text.out


def test_no_progress_bar_when_not_a_terminal(tidelog: RunTool, tmp_path: Path) -> None:
    log, _ = _v2_segment(tmp_path)
    r = tidelog("dump-log", "--files", str(log))
    assert "\r" not in r.err and "\r" not in r.out


def test_preallocated_index_slots_are_not_entries(tidelog: RunTool, tmp_path: Path) -> None:
    """An active segment's index files are preallocated with zeros (as Kafka's are)."""
    _, (b1, _b2, _b3) = _v2_segment(tmp_path)
    idx = tmp_path / "00000000000000000000.index"
    tidx = tmp_path / "00000000000000000000.timeindex"
    idx.write_bytes(b"\x00" * 80)
    tidx.write_bytes(b"\x00" * 120)
    r = tidelog("dump-log", "--files", str(idx), str(tidx))
    assert r.code == 0, r.err
    assert r.lines == [f"Dumping {idx}", f"{idx} is empty.", f"Dumping {tidx}", f"{tidx} is empty."]
    idx.write_bytes(offset_index(0, [(7, len(b1))]) + b"\x00" * 72)
    tidx.write_bytes(time_index(0, [(TS + 104, 7)]) + b"\x00" * 108)
    r = tidelog("dump-log", "--files", str(idx), str(tidx), "--verify-index-only")
    assert r.code == 0 and r.err == ""
    r = tidelog("dump-log", "--files", str(idx), str(tidx), "--index-sanity-check")
    assert r.code == 0, r.err
    assert r.lines[-1] == f"{tidx} passed sanity check."


def test_transaction_log_decoder_tombstone_unknown_and_damage(
    tidelog: RunTool, tmp_path: Path
) -> None:
    value = TxnLogValue(7, 1, 60000, 5, {"t": [1, 0]}, TS + 5, TS)
    batch = encode_batch(
        [
            NewRecord(encode_txn_key("tx"), encode_txn_value(value), (), TS),
            NewRecord(encode_txn_key("tx"), None, (), TS),
            NewRecord(struct.pack(">h", 9) + b"zz", b"", (), TS),
            NewRecord(encode_txn_key("tx"), b"\x00\x00\x01", (), TS),
        ],
        base_offset=0,
    )
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(batch)
    r = tidelog("dump-log", "--files", str(log), "--transaction-log-decoder",
                "--skip-record-metadata")  # fmt: skip
    assert r.code == 0, r.err
    key = '| key: {"type":"0","data":{"transactionalId":"tx"}}'
    assert r.lines[-4:] == [
        key + ' payload: {"version":"0","data":{"producerId":7,"producerEpoch":1,'
        '"transactionTimeoutMs":60000,"transactionStatus":"CompleteAbort","transactionPartitions":'
        '[{"topic":"t","partitionIds":[0,1]}],'
        f'"transactionLastUpdateTimestampMs":{TS + 5},"transactionStartTimestampMs":{TS}}}}}',
        key + " payload: <DELETE>",
        "| key: Unknown record type 9 at offset 2, skipping.",
        "| key: Error at offset 3, skipping. needs 8 bytes at 2, 1 left",
    ]
