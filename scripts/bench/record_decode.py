"""Why record_codec decodes 1- and 2-byte varints inline (issue 15: one varint codec).

Decodes one uncompressed batch of 1,000 records (5-byte keys, 100-byte values) with
``decode_batch_into`` as it is, then with the same decoder rewritten so that every varint goes
through ``storage.varint.read_uvarint`` (the shared reader the inline paths mirror), and prints
microseconds per batch for both.

    .venv/bin/python scripts/bench/record_decode.py
"""

from __future__ import annotations

import re
import sys
import timeit
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
    namespace = dict(vars(rc))
    exec(fn, namespace)
    original = rc._decode_records
    rc._decode_records = namespace["_decode_records"]
    try:
        shared = min(timeit.repeat(run, number=200, repeat=7)) / 200
    finally:
        rc._decode_records = original
    print(
        f"1000 records of 100 B: inline varints {inline * 1e6:.0f} us/batch, "
        f"every varint through read_uvarint {shared * 1e6:.0f} us/batch "
        f"({shared / inline:.2f}x)"
    )


if __name__ == "__main__":
    main()
