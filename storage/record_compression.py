"""Kafka's record compression codecs: gzip, snappy (raw, xerial-framed or snappy-framed),
lz4 (frame format, with Kafka 0.8/0.9's wrong header checksum fixed for magic 0), zstd.

The codec libraries (cramjam, lz4, zstandard) are imported on first use of their codec: a broker
whose clients do not compress never loads them (they cost ~10 ms of start-up together).
"""

from __future__ import annotations

import struct
import zlib

from tidelog.storage.record_types import (
    COMPRESSION_CODES,
    COMPRESSION_NAMES,
    MAX_UNCOMPRESSED,
    RecordDecodeError,
)

_I32 = struct.Struct(">i")
#: gzip output and input per zlib call (see ``_decompress_gzip``).
_GZIP_STEP = 256 * 1024
_GZIP_INPUT = 64 * 1024
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_FRAMED = b"\xff\x06\x00\x00sNaPpY"


def _xxh32_small(data: bytes) -> int:
    """xxHash32 (seed 0) of fewer than 16 bytes: enough for an LZ4 frame descriptor."""
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF
    h, i, n = (p5 + len(data)) & m, 0, len(data)
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i : i + 4], "little") * p3) & m
        h = (((h << 17) | (h >> 15)) & m) * p4 & m
        i += 4
    while i < n:
        h = (h + data[i] * p5) & m
        h = (((h << 11) | (h >> 21)) & m) * p1 & m
        i += 1
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    return h ^ (h >> 16)


def _fix_old_kafka_lz4(data: bytes) -> bytes:
    """Kafka 0.8/0.9 (magic 0) wrote the LZ4 frame header checksum over the magic bytes too."""
    if len(data) < 7:
        raise RecordDecodeError("lz4 frame shorter than its header")
    end = 7 + (8 if data[4] & 0x08 else 0) + (4 if data[4] & 0x01 else 0)
    if len(data) < end:
        raise RecordDecodeError("lz4 frame shorter than its header")
    hc = (_xxh32_small(data[4 : end - 1]) >> 8) & 0xFF
    return data[: end - 1] + bytes((hc,)) + data[end:]


def _snappy_raw(block: bytes, limit: int) -> bytes:
    size, shift, i = 0, 0, 0
    while True:  # the uncompressed length preamble: check it before decompressing
        if i >= len(block) or shift > 35:
            raise RecordDecodeError("snappy block has a corrupt length preamble")
        b = block[i]
        size |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if b < 0x80:
            break
    if size > limit:
        raise RecordDecodeError(f"snappy block of {size} bytes is over the {limit}-byte limit")
    import cramjam

    return bytes(cramjam.snappy.decompress_raw(block))


def _decompress_snappy(data: bytes, limit: int) -> bytes:
    if data.startswith(_XERIAL_MAGIC):  # Java clients: xerial framing of raw blocks
        out, pos, total = [], 16, 0
        while pos < len(data):
            if pos + 4 > len(data):
                raise RecordDecodeError("xerial snappy block length is truncated")
            (n,) = _I32.unpack_from(data, pos)
            if n < 0 or pos + 4 + n > len(data):
                raise RecordDecodeError(f"xerial snappy block of {n} bytes overruns the data")
            chunk = _snappy_raw(data[pos + 4 : pos + 4 + n], limit - total)
            total += len(chunk)
            out.append(chunk)
            pos += 4 + n
        return b"".join(out)
    if data.startswith(_SNAPPY_FRAMED):
        import cramjam

        return _bounded(bytes(cramjam.snappy.decompress(data)), limit)
    return _snappy_raw(data, limit)  # librdkafka / kafka-python: raw snappy


def _decompress_gzip(data: bytes, limit: int) -> bytes:
    """gzip members, fed to zlib 64 KiB of input and at most ``_GZIP_STEP`` of output per call:
    zlib holds the GIL for a whole call (one call for 32 MiB held it ~90 ms), and small inputs
    keep ``unconsumed_tail`` (a copy zlib makes at every call) small."""
    out = bytearray()
    rest = memoryview(data)
    while len(rest):
        d = zlib.decompressobj(wbits=31)
        position = 0
        pending: bytes | memoryview = b""
        while not d.eof:
            if not pending:
                if position >= len(rest):
                    break
                pending = rest[position : position + _GZIP_INPUT]
                position += len(pending)
            piece = d.decompress(pending, min(_GZIP_STEP, limit + 1 - len(out)))
            out += piece
            if len(out) > limit:
                raise RecordDecodeError(f"gzip data is over the {limit}-byte limit")
            pending = d.unconsumed_tail
        if not d.eof:
            raise RecordDecodeError("gzip data is truncated")
        # the next member (rare): what zlib read past this one, then the input not yet fed
        rest = memoryview(d.unused_data + bytes(rest[position:]))
    return bytes(out)


def _bounded(out: bytes, limit: int) -> bytes:
    if len(out) > limit:
        raise RecordDecodeError(f"decompressed batch is over the {limit}-byte limit")
    return out


def decompress(codec: int, data: bytes, *, magic: int = 2, limit: int = MAX_UNCOMPRESSED) -> bytes:
    """Decompress a batch's records (or a legacy wrapper's value); `limit` caps the output."""
    if codec in COMPRESSION_NAMES and codec and not data:
        raise RecordDecodeError(f"{COMPRESSION_NAMES[codec]} data is empty")
    try:
        if codec == 1:  # gzip: members may be concatenated
            return _decompress_gzip(data, limit)
        if codec == 2:
            return _decompress_snappy(data, limit)
        if codec == 3:
            if magic == 0:
                data = _fix_old_kafka_lz4(data)
            import lz4.frame

            dec = lz4.frame.LZ4FrameDecompressor()
            res = dec.decompress(data, max_length=limit + 1)
            if len(res) > limit:
                raise RecordDecodeError(f"lz4 data is over the {limit}-byte limit")
            if not dec.eof:
                raise RecordDecodeError("lz4 frame is truncated")
            return bytes(res)
        if codec == 4:  # streaming: producers may omit the content size
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
            with reader:
                return _bounded(reader.read(limit + 1), limit)
    except RecordDecodeError:
        raise
    except Exception as e:  # each library raises its own types: zlib.error, cramjam, lz4, zstd
        name = COMPRESSION_NAMES.get(codec, str(codec))
        raise RecordDecodeError(f"cannot decompress {name} data: {e}") from e
    raise RecordDecodeError(f"unknown compression codec {codec} (Kafka knows 0-4)")


def compress(codec: int | str, data: bytes, *, level: int | None = None) -> bytes:
    """Compress records the way Kafka's Java client does (snappy in xerial framing)."""
    code = COMPRESSION_CODES[codec] if isinstance(codec, str) else codec
    if code == 0:
        return data
    if code == 1:
        co = zlib.compressobj(level if level is not None else 6, wbits=31)
        return co.compress(data) + co.flush()
    if code == 2:
        import cramjam

        parts = [_XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
        for i in range(0, len(data), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + 32 * 1024]))
            parts += (_I32.pack(len(block)), block)
        return b"".join(parts)
    if code == 3:
        import lz4.frame

        return bytes(lz4.frame.compress(data, block_linked=False, compression_level=level or 0))
    if code == 4:
        import zstandard

        return bytes(zstandard.ZstdCompressor(level=level or 3).compress(data))
    raise ValueError(f"unknown compression {codec!r}: use one of {sorted(COMPRESSION_CODES)}")
