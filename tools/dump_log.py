"""``tidelog dump-log``: print segment files as Kafka's kafka-dump-log.sh does (offline).

Reads ``.log`` (message formats v0, v1 and v2, compressed or not), ``.index``, ``.timeindex``,
``.snapshot`` (producer state) and ``.txnindex`` files. No broker is needed; the files may belong
to a running tidelog or Apache Kafka broker (they are only read).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from tidelog.storage.batch import INT32_MAX
from tidelog.storage.record_codec import (
    DecodedBatch,
    LegacyBatch,
    Record,
    RecordDecodeError,
    decode_batch,
    decode_legacy_entry,
)
from tidelog.tools._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Progress,
    SubParsers,
    ToolError,
    add_tool_parser,
)
from tidelog.tools._offsets_json import offsets_key_value
from tidelog.tools._segment_files import (
    LogBatch,
    SegmentFileError,
    base_offset_of,
    index_lookup,
    iter_log_batches,
    legacy_inner_checks,
    offset_index_sanity,
    read_offset_index,
    read_producer_snapshot,
    read_time_index,
    read_txn_index,
    time_index_sanity,
)
from tidelog.tools._share_state_json import share_state_key_value
from tidelog.tools._txn_json import txn_key_value

__all__ = ["add_parser", "run"]

TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}

EXAMPLES = """\
  tidelog dump-log --files data/orders-0/00000000000000000000.log
  tidelog dump-log --files data/orders-0/00000000000000000000.log --print-data-log
  tidelog dump-log --files 00000000000000000000.index,00000000000000000000.timeindex
  tidelog dump-log --files data/orders-0/*.index --verify-index-only
  tidelog dump-log --files data/orders-0/00000000000000000000.index --index-sanity-check
  tidelog dump-log --files data/orders-0/00000000000000000042.snapshot
"""


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "dump-log",
        help="print the contents of segment files (offline, like kafka-dump-log.sh)",
        description="Print .log, .index, .timeindex, .snapshot and .txnindex files of a "
        "partition directory the way Kafka's kafka-dump-log.sh prints them. Works offline on "
        "tidelog's and Apache Kafka's files alike. Index mismatches go to stderr.",
        examples=EXAMPLES,
        run=run,
    )
    p.add_argument(
        "--files",
        nargs="+",
        required=True,
        metavar="FILE",
        help="files to dump (space- or comma-separated)",
    )
    p.add_argument(
        "--print-data-log",
        action="store_true",
        help="print each record's key and payload (implies --deep-iteration)",
    )
    p.add_argument(
        "--deep-iteration", action="store_true", help="print every record, not only batches"
    )
    p.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="with --print-data-log, print only keys and payloads",
    )
    p.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the log without printing them",
    )
    p.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only run the check that decides an index rebuild at start-up",
    )
    p.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode __consumer_offsets records (keys and values as JSON; implies "
        "--print-data-log)",
    )
    p.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="decode __transaction_state records (keys and values as JSON; implies "
        "--print-data-log)",
    )
    p.add_argument(
        "--share-group-state-decoder",
        action="store_true",
        help="decode __share_group_state records (keys and values as JSON; implies "
        "--print-data-log)",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=INT32_MAX,
        metavar="N",
        help="read at most N bytes of each .log file",
    )
    p.add_argument(
        "--max-message-size",
        type=int,
        default=5 * 1024 * 1024,
        metavar="N",
        help="largest batch expected when checking index entries (default 5242880)",
    )


class _Report:
    """What goes to stderr after all files: index mismatches, non-consecutive offsets."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, dict[int, int]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, dict[int, int]] = {}

    def problems(self) -> bool:
        return any(
            (self.index_mismatches, self.time_mismatches, self.time_out_of_order,
             self.time_not_found)
        )  # fmt: skip

    def print(self, err: TextIO) -> None:
        for name, mismatches in self.index_mismatches.items():
            err.write(f"Mismatches in :{name}\n")
            for index_offset in sorted(mismatches, reverse=True):
                err.write(
                    f"  Index offset: {index_offset}, log offset: {mismatches[index_offset]}\n"
                )
        for name, pairs in self.time_mismatches.items():
            err.write(f"Found timestamp mismatch in :{name}\n")
            for index_ts, log_ts in pairs:
                err.write(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for name, pairs in self.time_out_of_order.items():
            err.write(f"Found out of order timestamp in :{name}\n")
            for index_ts, prev_ts in pairs:
                err.write(
                    f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}\n"
                )
        for pairs in self.time_not_found.values():
            err.write("The following indexed offsets are not found in the log.\n")
            for index_offset, log_offset in pairs:
                err.write(f"Indexed offset: {index_offset}, found log offset: {log_offset}\n")
        for name, follows in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {name}\n")
            for prev in sorted(follows):
                err.write(f"  {prev} is followed by {follows[prev]}\n")


def run(args: argparse.Namespace) -> int:
    files = [f for item in args.files for f in item.split(",") if f]
    if not files:
        raise ToolError("--files needs at least one file", 2)
    out, err = sys.stdout, sys.stderr
    report = _Report()
    # Like Kafka, --offsets-decoder wins when both decoders are given.
    decoder = "offsets" if args.offsets_decoder else "txn" if args.transaction_log_decoder else ""
    if not decoder and args.share_group_state_decoder:
        decoder = "share"
    if decoder:
        args.print_data_log = True
    deep = args.deep_iteration or args.print_data_log
    failed = False
    for name in files:
        out.write(f"Dumping {name}\n")
        suffix = Path(name).suffix
        note = active_segment_note(name) if suffix in (".index", ".timeindex") else None
        if note is not None:
            err.write(note)
        try:
            if suffix == ".log":
                _dump_log(name, out, report, deep, args.print_data_log,
                          args.skip_record_metadata, args.max_bytes,
                          decoder)  # fmt: skip
            elif suffix == ".index":
                _dump_index(name, out, report, args.index_sanity_check, args.verify_index_only,
                            args.max_message_size)  # fmt: skip
            elif suffix == ".timeindex":
                _dump_time_index(name, out, report, args.index_sanity_check,
                                 args.verify_index_only)  # fmt: skip
            elif suffix == ".snapshot":
                _dump_snapshot(name, out)
            elif suffix == ".txnindex":
                for t in read_txn_index(name):
                    out.write(
                        f"version: {t.version} producerId: {t.producer_id} firstOffset: "
                        f"{t.first_offset} lastOffset: {t.last_offset} lastStableOffset: "
                        f"{t.last_stable_offset}\n"
                    )
            else:
                err.write(f"Ignoring unknown file {name}\n")
        except (SegmentFileError, RecordDecodeError) as exc:
            out.flush()
            err.write(f"tidelog dump-log: {exc}\n")
            failed = True
        except OSError as exc:
            out.flush()
            reason = "no such file" if isinstance(exc, FileNotFoundError) else exc.strerror
            err.write(f"tidelog dump-log: {name}: {reason}\n")
            failed = True
    out.flush()
    report.print(err)
    return EXIT_FAILURE if failed or report.problems() else EXIT_OK


#: Kafka's default index.interval.bytes: a broker adds an index entry about this often.
INDEX_INTERVAL_BYTES = 4096


def active_segment_note(name: str) -> str | None:
    """A note when ``name`` is an index of its partition's active segment (the newest ``.log``
    in the directory, its index file still preallocated) and the ``.log`` holds more than an
    index interval of batches past the last entry on disk: a running broker keeps that
    segment's newest index entries in memory and writes them at roll or clean shutdown, so the
    file may show fewer entries than the broker uses (the ``.log`` itself is complete)."""
    path = Path(name)
    try:
        base = base_offset_of(path)
        logs = [base_offset_of(p) for p in path.parent.glob("*.log")]
        entry = 8 if path.suffix == ".index" else 12
        size = path.stat().st_size
        with path.open("rb") as fh:
            fh.seek(max(0, size - entry))
            tail = fh.read(entry)
        if not logs or base != max(logs) or size == 0 or tail.strip(b"\x00"):
            return None  # not the newest segment, or a trimmed file (rolled or shut down)
        log = path.with_suffix(".log")
        offsets = read_offset_index(path.with_suffix(".index"))
        covered = offsets[-1][1] if offsets else 0
        if log.stat().st_size - covered <= INDEX_INTERVAL_BYTES:
            return None
    except (OSError, SegmentFileError, ValueError):
        return None
    return (
        f"Note: {path.name} belongs to the active segment of {path.parent.name}: a running "
        "broker writes this segment's newest index entries at roll or clean shutdown, so "
        "entries it holds in memory may be missing here (the .log file is complete)\n"
    )


# ---------------------------------------------------------------- .log


def _dump_log(
    name: str,
    out: TextIO,
    report: _Report,
    deep: bool,
    print_data: bool,
    skip_metadata: bool,
    max_bytes: int,
    decoder: str = "",
) -> None:
    out.write(f"Log starting offset: {base_offset_of(name)}\n")
    size = os.path.getsize(name)
    end = min(size, max_bytes)
    valid_bytes = 0
    # Kafka starts this at -1 and so reports "-1 is followed by <base>" for every segment but
    # the first; starting at base - 1 reports only real gaps.
    last_offset = [base_offset_of(name) - 1]
    with Progress(end, Path(name).name) as progress:
        for batch in iter_log_batches(name, 0, max_bytes):
            out.write(_batch_line(batch, valid_bytes))
            if deep:
                _dump_records(batch, name, out, report, last_offset, print_data, skip_metadata,
                              decoder)  # fmt: skip
            valid_bytes += batch.size
            progress.update(batch.size)
    trailing = end - valid_bytes
    if trailing > 0 and max_bytes == INT32_MAX:
        out.write(f"Found {trailing} invalid bytes at the end of {Path(name).name}\n")


def _batch_line(b: LogBatch, position: int) -> str:
    if b.magic >= 2:
        horizon = b.delete_horizon_ms
        head = (
            f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.count} "
            f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} "
            f"producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
            f"partitionLeaderEpoch: {b.partition_leader_epoch} "
            f"isTransactional: {_bool(b.is_transactional)} isControl: {_bool(b.is_control)} "
            f"deleteHorizonMs: "
            + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]")
        )
    else:
        head = f"offset: {b.last_offset}"
    return (
        f"{head} position: {position} {TIMESTAMP_TYPES[b.timestamp_type]}: {b.max_timestamp} "
        f"size: {b.size} magic: {b.magic} compresscodec: "
        f"{CODECS.get(b.compression, f'unknown({b.compression})')} crc: {b.crc} "
        f"isvalid: {_bool(b.is_valid)}\n"
    )


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _decode(batch: LogBatch) -> tuple[DecodedBatch | LegacyBatch, list[tuple[int, bool]]]:
    if batch.magic >= 2:
        return decode_batch(batch.data, verify_crc=False), []
    return decode_legacy_entry(batch.data, verify_crc=False), legacy_inner_checks(batch)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _dump_records(
    batch: LogBatch,
    name: str,
    out: TextIO,
    report: _Report,
    last_offset: list[int],
    print_data: bool,
    skip_metadata: bool,
    decoder: str = "",
) -> None:
    try:
        decoded, checks = _decode(batch)
    except RecordDecodeError as exc:
        raise RecordDecodeError(
            f"{name}: batch at position {batch.position} cannot be decoded: {exc}"
        ) from None
    ts_type = TIMESTAMP_TYPES[batch.timestamp_type]
    for i, r in enumerate(decoded.records):
        if r.offset != last_offset[0] + 1:
            report.non_consecutive.setdefault(os.path.abspath(name), {})[last_offset[0]] = r.offset
        last_offset[0] = r.offset
        line = [] if skip_metadata else [_record_metadata(batch, r, ts_type, checks, i)]
        if print_data and not batch.is_control and decoder == "offsets":
            key_text, payload = offsets_key_value(r.key, r.value)
            line.append(f"{'| ' if skip_metadata else ' '}key: {key_text} payload: {payload}")
        elif print_data and not batch.is_control and decoder == "share":
            key_text, share_payload = share_state_key_value(r.offset, r.key, r.value)
            line.append(f"{'| ' if skip_metadata else ' '}key: {key_text}")
            if share_payload is not None:
                line.append(f" payload: {share_payload}")
        elif print_data and not batch.is_control and decoder == "txn":
            key_text, txn_payload = txn_key_value(r.offset, r.key, r.value)
            line.append(f"{'| ' if skip_metadata else ' '}key: {key_text}")
            if txn_payload is not None:
                line.append(f" payload: {txn_payload}")
        elif print_data and not batch.is_control:
            prefix = "| " if skip_metadata else " "
            if r.key is not None:
                line.append(f"{prefix}key: {_text(r.key)}")
                prefix = " "
            if r.value is not None:
                line.append(f"{prefix}payload: {_text(r.value)}")
        out.write("".join(line) + "\n")


def _record_metadata(
    batch: LogBatch, r: Record, ts_type: str, checks: list[tuple[int, bool]], i: int
) -> str:
    parts = [
        f"| offset: {r.offset} {ts_type}: {r.timestamp} "
        f"keySize: {-1 if r.key is None else len(r.key)} "
        f"valueSize: {-1 if r.value is None else len(r.value)}"
    ]
    if batch.magic >= 2:
        keys = ",".join(k for k, _ in r.headers)
        parts.append(f" sequence: {r.sequence} headerKeys: [{keys}]")
    elif i < len(checks):
        crc, valid = checks[i]
        parts.append(f" isValid: {_bool(valid)} crc: {crc}")
    if batch.is_control:
        parts.append(_control_text(r))
    return "".join(parts)


def _control_text(r: Record) -> str:
    key, value = r.key or b"", r.value or b""
    ctype = int.from_bytes(key[2:4], "big", signed=True) if len(key) >= 4 else -1
    if ctype in CONTROL_TYPES and len(value) >= 6:
        epoch = int.from_bytes(value[2:6], "big", signed=True)
        return f" endTxnMarker: {CONTROL_TYPES[ctype]} coordinatorEpoch: {epoch}"
    return f" controlType: UNKNOWN({ctype})"


# ---------------------------------------------------------------- indexes


def _log_beside(index_name: str) -> str:
    p = Path(index_name)
    log = p.with_name(p.name.split(".")[0] + ".log")
    if not log.exists():
        raise SegmentFileError(
            f"{index_name}: its log file {log} is missing; index entries are checked against "
            "it (copy the .log next to the index)"
        )
    return str(log)


def _first_batch(log: str, position: int, max_bytes: int = INT32_MAX) -> LogBatch | None:
    return next(iter_log_batches(log, position, max_bytes), None)


def _dump_index(
    name: str,
    out: TextIO,
    report: _Report,
    sanity_only: bool,
    verify_only: bool,
    max_message_size: int,
) -> None:
    base = base_offset_of(name)
    log = _log_beside(name)
    entries = read_offset_index(name)
    if not entries:
        out.write(f"{name} is empty.\n")
        return
    if sanity_only:
        offset_index_sanity(name)
        out.write(f"{name} passed sanity check.\n")
        return
    for i, (offset, position) in enumerate(entries):
        if offset == base and i > 0:
            return  # preallocated zeros (an active segment, or a crash): the entries ended
        batch = _first_batch(log, position, max_message_size)
        found = batch.last_offset if batch is not None else -1
        if i == 0 and (offset, position) == (base, 0) and found != base:
            # Kafka divergence: Kafka's tool dumps (and flags) the zero slot of a preallocated
            # index that holds no entry yet; here it counts as empty.
            out.write(f"{name} is empty.\n")
            return
        if found != offset:
            report.index_mismatches.setdefault(os.path.abspath(name), {})[offset] = found
        if not verify_only:
            out.write(f"offset: {offset} position: {position}\n")


def _max_record_timestamp(batch: LogBatch) -> int:
    decoded, _ = _decode(batch)
    return max((r.timestamp for r in decoded.records), default=-1)


def _dump_time_index(
    name: str, out: TextIO, report: _Report, sanity_only: bool, verify_only: bool
) -> None:
    base = base_offset_of(name)
    log = _log_beside(name)
    index_path = Path(name).with_name(Path(name).name.split(".")[0] + ".index")
    index = read_offset_index(index_path) if index_path.exists() else []
    entries = read_time_index(name)
    if not entries:
        out.write(f"{name} is empty.\n")
        return
    if sanity_only:
        time_index_sanity(name)
        out.write(f"{name} passed sanity check.\n")
        return
    absolute = os.path.abspath(name)
    prev_ts = -1
    for i, (timestamp, offset) in enumerate(entries):
        if offset == base and i > 0:
            return
        if i == 0 and (timestamp, offset) == (0, base):  # preallocated, no entry yet
            out.write(f"{name} is empty.\n")
            return
        match = _find_batch(log, index_lookup(index, offset), offset)
        if match is None:
            report.time_not_found.setdefault(absolute, []).append((offset, -1))
        elif match.last_offset != offset:
            report.time_not_found.setdefault(absolute, []).append((offset, match.last_offset))
        else:
            max_ts = _max_record_timestamp(match)
            if max_ts != timestamp:
                report.time_mismatches.setdefault(absolute, []).append((timestamp, max_ts))
            if prev_ts >= timestamp:
                report.time_out_of_order.setdefault(absolute, []).append((timestamp, prev_ts))
        if not verify_only:
            out.write(f"timestamp: {timestamp} offset: {offset}\n")
        prev_ts = timestamp


def _find_batch(log: str, position: int, offset: int) -> LogBatch | None:
    """The first batch from ``position`` whose last offset is at least ``offset``."""
    for batch in iter_log_batches(log, position):
        if batch.last_offset >= offset:
            return batch
    return None


# ---------------------------------------------------------------- producer snapshots


def _dump_snapshot(name: str, out: TextIO) -> None:
    for e in read_producer_snapshot(name):
        txn = (
            f"OptionalLong[{e.current_txn_first_offset}]"
            if e.current_txn_first_offset >= 0
            else "OptionalLong.empty"
        )
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
            f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {txn} "
            f"lastTimestamp: {e.timestamp}"
        )
        if e.last_offset >= 0:
            line += (
                f" firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} "
                f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                f"timestamp: {e.timestamp}"
            )
        out.write(line + "\n")
