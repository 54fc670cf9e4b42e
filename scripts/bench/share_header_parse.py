"""The share reader's batch-header walk, before (its own struct) and after (storage.batch's
``unpack_batch_header``), in-process: ``python scripts/bench/share_header_parse.py``.

Best of 15 alternating runs of CPU time per header over 2,000 batches of one 100-byte record.
"""

import struct
import time

from tidelog.storage.batch import BATCH_HEADER_SIZE, unpack_batch_header
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

one = encode_batch([NewRecord(key=b"k", value=b"v" * 100, timestamp=1)])
data = one * 2000
_HEADER = struct.Struct(">qiibIhiqqqhi")


def old():
    pos = 0
    out = []
    while pos + _HEADER.size <= len(data):
        base, length, _e, _m, _c, attributes, last_delta, *_rest = _HEADER.unpack_from(data, pos)
        _producer_id = _rest[2]
        size = 12 + length
        if pos + size > len(data):
            break
        skip = bool(attributes & 0x20)
        out.append((base, base + last_delta, skip))
        pos += size
    return out


def new():
    pos = 0
    out = []
    while pos + BATCH_HEADER_SIZE <= len(data):
        h = unpack_batch_header(data, pos)
        size = h.size_in_bytes
        if pos + size > len(data):
            break
        base = h.base_offset
        skip = h.is_control
        out.append((base, h.last_offset, skip))
        pos += size
    return out


best = {"before": 1e9, "after": 1e9}
for _ in range(15):
    for name, fn in (("before", old), ("after", new)):
        t = time.process_time()
        fn()
        fn()
        fn()
        best[name] = min(best[name], (time.process_time() - t) / 3 / 2000 * 1e9)
for name, ns in best.items():
    print(f"{name}: {ns:.0f} ns CPU per header (best of 15)")
