"""The record codecs of Kafka batches (attributes bits 0-2): decompression with a size cap, and
compression for a topic whose compression.type makes the leader recompress.

The broker decompresses produced batches to validate their records, so a small compressed batch
must not be able to make it allocate gigabytes: every codec stops once the output would pass
`max_bytes` and raises DecompressionError instead.

Compression writes what Kafka's Java producer writes, which every client reads: a gzip stream,
xerial-framed snappy, an lz4 frame of independent 64 KiB blocks, a zstd frame.
"""

from __future__ import annotations

import struct
import zlib

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = range(5)
CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4",
               CODEC_ZSTD: "zstd"}
XERIAL_MAGIC = b"\x82SNAPPY\x00"  # the Java client's snappy framing: 16-byte header, then [len][block]...
_LENGTH = struct.Struct(">i")
UNLIMITED = 1 << 62
_CHUNK = 1 << 20  # output is produced this much at a time, so the cap is checked as it grows


class DecompressionError(ValueError):
    """The payload does not decompress with its codec, or decompresses to more than allowed."""


def decompress(codec: int, payload, max_bytes: int = UNLIMITED) -> bytes:
    """The records section of a batch, uncompressed, at most `max_bytes` long."""
    try:
        if codec == CODEC_NONE:
            out = bytes(payload)
        elif codec == CODEC_GZIP:
            out = _gunzip(bytes(payload), max_bytes)
        elif codec == CODEC_SNAPPY:
            out = _unsnappy(bytes(payload), max_bytes)
        elif codec == CODEC_LZ4:
            out = _unlz4(bytes(payload), max_bytes)
        elif codec == CODEC_ZSTD:
            out = _unzstd(bytes(payload), max_bytes)
        else:
            raise DecompressionError(f"unknown compression codec {codec}")
    except DecompressionError:
        raise
    except Exception as e:  # noqa: BLE001 - each codec library raises its own error types
        raise DecompressionError(f"cannot decompress {CODEC_NAMES.get(codec, codec)}: "
                                 f"{e or type(e).__name__}") from e
    if len(out) > max_bytes:
        raise _too_large(max_bytes)
    return out


def _too_large(max_bytes: int) -> DecompressionError:
    return DecompressionError(f"records decompress to more than {max_bytes} bytes")


def _gunzip(payload: bytes, max_bytes: int) -> bytes:
    out = bytearray()
    while payload:  # a gzip stream may hold several members
        d = zlib.decompressobj(31)
        out += d.decompress(payload, max_bytes + 1 - len(out))
        if len(out) > max_bytes:
            raise _too_large(max_bytes)
        if not d.eof:
            raise DecompressionError("truncated gzip stream")
        payload = d.unused_data
    return bytes(out)


def _unsnappy(payload: bytes, max_bytes: int) -> bytes:
    import snappy
    if payload[:8] != XERIAL_MAGIC:
        return _snappy_block(snappy, payload, max_bytes)
    out, pos, total = [], 16, 0
    while pos < len(payload):
        (size,) = _LENGTH.unpack_from(payload, pos)
        if size < 0 or pos + 4 + size > len(payload):
            raise DecompressionError("truncated xerial snappy block")
        block = _snappy_block(snappy, payload[pos + 4:pos + 4 + size], max_bytes - total)
        total += len(block)
        out.append(block)
        pos += 4 + size
    return b"".join(out)


def _snappy_block(snappy, block: bytes, max_bytes: int) -> bytes:
    """A raw snappy block starts with its uncompressed length (a varint): check it first."""
    length, shift = 0, 0
    for i, byte in enumerate(block[:5]):
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    else:
        raise DecompressionError("bad snappy block length")
    if length > max_bytes:
        raise _too_large(max_bytes)
    return snappy.decompress(block)


def _unlz4(payload: bytes, max_bytes: int) -> bytes:
    import lz4.frame
    d = lz4.frame.LZ4FrameDecompressor()
    out = bytearray(d.decompress(payload, max_length=_CHUNK))
    while not d.eof and not d.needs_input:  # more output is waiting
        out += d.decompress(b"", max_length=_CHUNK)
        if len(out) > max_bytes:
            raise _too_large(max_bytes)
    if not d.eof:
        raise DecompressionError("truncated lz4 frame")
    if d.unused_data:  # consumers (librdkafka) read one frame and refuse what follows it
        raise DecompressionError(f"{len(d.unused_data)} bytes after the lz4 frame")
    return bytes(out)


_ZSTD_FEED = 512  # input bytes per step: at most 128 blocks of at most 128 KiB each come out of it


def _unzstd(payload: bytes, max_bytes: int) -> bytes:
    """Every frame whole, as libzstd's ZSTD_decompress (librdkafka's) and zstd-jni (Java's) demand:
    a truncated frame, a missing or wrong checksum, or bytes after the last frame are refused, not
    stored for consumers that cannot read them. The input goes in small steps so a bomb stops
    near max_bytes."""
    import zstandard
    decompressor = zstandard.ZstdDecompressor()
    out = bytearray()
    view = memoryview(payload)
    while view:
        frame = decompressor.decompressobj()
        fed = 0
        while not frame.eof and fed < len(view):
            out += frame.decompress(view[fed:fed + _ZSTD_FEED])
            fed += _ZSTD_FEED
            if len(out) > max_bytes:
                raise _too_large(max_bytes)
        if not frame.eof:
            raise DecompressionError("truncated zstd frame")
        view = view[min(fed, len(view)) - len(frame.unused_data):]  # the next frame
    return bytes(out)


_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with version 1
_XERIAL_BLOCK = 32 * 1024  # the Java producer's SnappyOutputStream block size
LZ4_DEFAULT_LEVEL = 9  # Kafka's compression.lz4.level default: lz4's fast mode


def compress(codec: int, data, level: int | None = None) -> bytes:
    """A records section compressed with `codec` at Kafka's `level` (None: the codec's default;
    snappy has none)."""
    data = bytes(data)
    if codec == CODEC_NONE:
        return data
    if codec == CODEC_GZIP:
        packer = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()
    if codec == CODEC_SNAPPY:
        import snappy
        blocks = [data[i:i + _XERIAL_BLOCK] for i in range(0, len(data), _XERIAL_BLOCK)]
        return _XERIAL_HEADER + b"".join(_LENGTH.pack(len(c)) + c for c in map(snappy.compress, blocks))
    if codec == CODEC_LZ4:
        import lz4.frame

        # Kafka's levels: its default is lz4's fast compressor, the others lz4's high compression.
        lz4_level = 0 if level is None or level == LZ4_DEFAULT_LEVEL else min(level, lz4.frame.COMPRESSIONLEVEL_MAX)
        return lz4.frame.compress(data, compression_level=lz4_level, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                  block_linked=False, store_size=False)
    if codec == CODEC_ZSTD:
        import zstandard
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise ValueError(f"unknown compression codec {codec}")
