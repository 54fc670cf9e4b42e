"""Why record_codec decodes 1- and 2-byte varints, keys and values inline.

Decodes one uncompressed batch of 1,000 records (5-byte keys, 100-byte values) with
``decode_batch_into`` as it is, then with the same decoder rewritten so that every varint goes
through ``storage.varint.read_uvarint`` (the shared reader the inline paths mirror), then with
the key and the value read by one shared function (``_len_prefixed`` below) instead of the two
inline copies, and prints microseconds per batch for each (the last also for 10-byte values).

    .venv/bin/python scripts/bench/record_decode.py
"""

from __future__ import annotations

import re
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tidelog.storage import record_codec as rc
from tidelog.storage.record_codec import (
    NewRecord,
    RecordColumns,
    decode_batch_into,
    encode_batch,
)


def main() -> None:
    records = [NewRecord(b"k%04d" % i, b"v" * 100, (), 1_700_000_000_000 + i) for i in range(1000)]
    buf = encode_batch(records)

    def run() -> None:
        decode_batch_into(buf, RecordColumns(), verify_crc=False)

    inline = min(timeit.repeat(run, number=200, repeat=7)) / 200
    source = Path(rc.__file__).read_text()
    start = source.index("def _decode_records(")
    end = source.index("\ndef decode_headers(")
    fn = re.sub(
        r"if v < 0x80:\n(\s+)pos \+= (\d)\n\s+elif data\[pos \+ \d\] < 0x80:\n\s+v, pos = .*\n"
        r"\s+else:\n\s+v, pos = uv\(data, pos( \+ 1)?, n\)",
        lambda m: f"v, pos = uv(data, pos{m.group(3) or ''}, n)",
        source[start:end],
    )
    assert fn.count("uv(data") == 5, "the decoder's shape changed: update this script"
    shared = _timed(fn, run)
    print(
        f"1000 records of 100 B: inline varints {inline * 1e6:.0f} us/batch, "
        f"every varint through read_uvarint {shared * 1e6:.0f} us/batch "
        f"({shared / inline:.2f}x)"
    )
    body = source[start:end]
    key_at = body.index("        v = data[pos]  # key length")
    headers_at = body.index("        if data[pos] == 0:  # no headers")
    one_reader = (
        _LEN_PREFIXED
        + body[:key_at]
        + "        key, pos = _len_prefixed(data, pos, end, n, uv, 'key')\n"
        + "        key_add(key)\n"
        + "        value, pos = _len_prefixed(data, pos, end, n, uv, 'value')\n"
        + "        val_add(value)\n"
        + body[headers_at:]
    )
    for value_size in (100, 10):
        small = [
            NewRecord(b"k%04d" % i, b"v" * value_size, (), 1_700_000_000_000 + i)
            for i in range(1000)
        ]
        batch = encode_batch(small)

        def run_small(batch: bytes = batch) -> None:
            decode_batch_into(batch, RecordColumns(), verify_crc=False)

        kept = min(timeit.repeat(run_small, number=200, repeat=7)) / 200
        helper = _timed(one_reader, run_small)
        print(
            f"1000 records of {value_size} B: key and value inline {kept * 1e6:.0f} us/batch, "
            f"through one _len_prefixed {helper * 1e6:.0f} us/batch ({helper / kept:.2f}x)"
        )


_LEN_PREFIXED = """
def _len_prefixed(data, pos, end, n, uv, what):
    v = data[pos]
    if v == 1:
        return None, pos + 1
    if v < 0x80:
        pos += 1
    elif data[pos + 1] < 0x80:
        v, pos = (v & 0x7F) | data[pos + 1] << 7, pos + 2
    else:
        v, pos = uv(data, pos, n)
    if v & 1:
        raise RecordDecodeError(f"invalid {what} length {(v >> 1) ^ -1}")
    v >>= 1
    if pos + v > end:
        raise RecordDecodeError(f"{what} length {v} overruns its record")
    return data[pos : pos + v], pos + v

"""


def _timed(source: str, run: Callable[[], None]) -> float:
    """Seconds per ``run()`` with ``_decode_records`` replaced by the one in ``source``."""
    namespace = dict(vars(rc))
    exec(source, namespace)
    original = rc._decode_records
    rc._decode_records = namespace["_decode_records"]
    try:
        return min(timeit.repeat(run, number=200, repeat=7)) / 200
    finally:
        rc._decode_records = original


if __name__ == "__main__":
    main()
