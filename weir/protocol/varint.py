"""Unsigned varints of the flexible protocol versions, and the zigzag varlongs of records."""


class VarintError(ValueError):
    pass


def read_uvarint(buf: bytes | memoryview, offset: int) -> tuple[int, int]:
    """Return (value, next offset). At most 5 bytes: values are int32-sized."""
    value = 0
    shift = 0
    for position in range(offset, min(offset + 5, len(buf))):
        byte = buf[position]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position + 1
        shift += 7
    raise VarintError("truncated or oversized unsigned varint")


def read_varlong(buf: bytes | memoryview, offset: int) -> tuple[int, int]:
    """Return (value, next offset) of a zigzag varlong (at most 10 bytes), as a record's fields
    are written (its timestamp delta needs the 10)."""
    raw = shift = 0
    for position in range(offset, min(offset + 10, len(buf))):
        raw |= (buf[position] & 0x7F) << shift
        if not buf[position] & 0x80:
            return (raw >> 1) ^ -(raw & 1), position + 1
        shift += 7
    raise VarintError("truncated or oversized varlong")


def write_uvarint(value: int) -> bytes:
    assert value >= 0
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
