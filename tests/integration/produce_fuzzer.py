"""A fuzzer for the produce path: structurally valid Produce frames that carry CRC-valid but
semantically wrong record batches (every header field, the records, their compression, perturbed
alone and together), plus truncated, garbage and oversized frames, sent at a running broker for a
bounded time. What it sends and what came back is counted in a `FuzzReport`; the test that drives
it checks the broker afterwards.
"""

from __future__ import annotations

import datetime
import random
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass, field

from crc32c import crc32c
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from log.batches import COMPRESS as CODECS
from log.batches import encode_record, raw_batch, zigzag_varint
from raw_protocol import PRODUCE, PRODUCE_V, BrokerClosed, RawClient, header_bytes, request_payload, sized

COMPRESS = {0: lambda b: b, **CODECS}
FIELDS = {  # header field: (position, struct format)
    "base_offset": (0, ">q"), "batch_length": (8, ">i"), "leader_epoch": (12, ">i"), "magic": (16, ">b"),
    "attributes": (21, ">h"), "last_offset_delta": (23, ">i"), "base_timestamp": (27, ">q"),
    "max_timestamp": (35, ">q"), "producer_id": (43, ">q"), "producer_epoch": (51, ">h"),
    "base_sequence": (53, ">i"), "record_count": (57, ">i"),
}
HEADER_SIZE = 61


@dataclass
class FuzzReport:
    requests: int = 0
    frames_cut_or_garbage: int = 0
    batches: int = 0
    accepted: int = 0
    refused: Counter = field(default_factory=Counter)  # error code → count
    connections_closed: int = 0

    def summary(self) -> str:
        refused = ", ".join(f"{code}: {n}" for code, n in sorted(self.refused.items()))
        return (f"{self.requests} produce requests with {self.batches} batches: {self.accepted} accepted, "
                f"refused by error code {{{refused}}}; {self.frames_cut_or_garbage} cut, garbage or oversized "
                f"frames; {self.connections_closed} connections closed by the broker")


# -- valid batches ------------------------------------------------------------------------------

def records_section(rng: random.Random, count: int) -> tuple[bytes, list[int]]:
    deltas = [rng.randrange(-5_000, 5_000) for _ in range(count)]
    records = b"".join(encode_record(i, deltas[i], rng.choice([None, b"", rng.randbytes(rng.randrange(1, 20))]),
                               rng.choice([None, rng.randbytes(rng.randrange(0, 300))]),
                               [(b"h%d" % j, rng.choice([None, b"x" * j])) for j in range(rng.randrange(3))])
                       for i in range(count))
    return records, deltas


def build_batch(records: bytes, count: int, *, codec: int, base_ts: int, max_ts: int, producer: tuple = (-1, -1, -1),
                attributes: int | None = None) -> bytearray:
    pid, epoch, sequence = producer
    return bytearray(raw_batch(COMPRESS[codec](records), count, attributes=codec if attributes is None else attributes,
                               base_timestamp=base_ts, max_timestamp=max_ts, producer_id=pid, producer_epoch=epoch,
                               base_sequence=sequence))


def fix_crc(batch: bytearray) -> None:
    if len(batch) >= HEADER_SIZE:
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))


def fix_length(batch: bytearray) -> None:
    if len(batch) >= 12:
        struct.pack_into(">i", batch, 8, len(batch) - 12)


def valid_batch(rng: random.Random, now_ms: int) -> bytearray:
    count = rng.randrange(1, 30)
    records, deltas = records_section(rng, count)
    base_ts = now_ms - rng.randrange(0, 100_000)
    return build_batch(records, count, codec=rng.randrange(5), base_ts=base_ts,
                       max_ts=rng.choice([-1, base_ts + max(deltas)]))


# -- mutations: each takes a valid batch and returns bytes, usually with a CRC that matches -----

def perturb_field(rng: random.Random, batch: bytearray) -> bytearray:
    name = rng.choice(list(FIELDS))
    position, fmt = FIELDS[name]
    bits = struct.calcsize(fmt) * 8
    value = rng.choice([0, 1, -1, 2, -2, 5, 0x20, 0x10, 0x08, 7, (1 << (bits - 1)) - 1, -(1 << (bits - 1)),
                        rng.randrange(-(1 << (bits - 1)), 1 << (bits - 1))])
    struct.pack_into(fmt, batch, position, value)
    return batch


def flip_record_bytes(rng: random.Random, batch: bytearray) -> bytearray:
    for _ in range(rng.randrange(1, 4)):
        if len(batch) > HEADER_SIZE:
            batch[rng.randrange(HEADER_SIZE, len(batch))] ^= rng.randrange(1, 256)
    return batch


def cut_records(rng: random.Random, batch: bytearray) -> bytearray:
    del batch[rng.randrange(HEADER_SIZE, max(HEADER_SIZE + 1, len(batch))):]
    return batch


def append_junk(rng: random.Random, batch: bytearray) -> bytearray:
    batch += rng.choice([b"\x00", b"\x01\x02", rng.randbytes(rng.randrange(1, 50))])
    return batch


def wrong_records(rng: random.Random, batch: bytearray) -> bytearray:
    """Re-encode the records with one thing wrong: offset deltas, a length, a header, a count."""
    count = rng.randrange(1, 10)
    records = [encode_record(i, 0, b"k", b"v" * i, []) for i in range(count)]
    how = rng.randrange(5)
    i = rng.randrange(count)
    if how == 0:
        records[i] = encode_record(i + rng.choice([1, -1, 5]), 0, b"k", b"v", [])
    elif how == 1:
        body = records[i][1:]
        records[i] = zigzag_varint(len(body) + rng.choice([-2, -1, 1, 3])) + body
    elif how == 2:
        records[i] = zigzag_varint(7) + b"\x00\x00" + zigzag_varint(i) + zigzag_varint(-5) + b"\x00\x00\x00"
    elif how == 3:
        records[i] = b"\xff" * rng.randrange(1, 12)
    else:
        count += rng.choice([-1, 1])
    codec = rng.randrange(5)
    return build_batch(b"".join(records), max(count, 1), codec=codec, base_ts=int(time.time() * 1000),
                       max_ts=-1)


def corrupt_compressed(rng: random.Random, batch: bytearray) -> bytearray:
    codec = rng.randrange(1, 5)
    payload = COMPRESS[codec](records_section(rng, 5)[0])
    broken = bytearray(payload)
    how = rng.randrange(3)
    if how == 0:
        del broken[rng.randrange(len(broken)):]
    elif how == 1:
        broken[rng.randrange(len(broken))] ^= 0xFF
    else:
        broken = bytearray(rng.randbytes(len(broken)))
    return bytearray(raw_batch(bytes(broken), 5, attributes=codec, base_timestamp=0, max_timestamp=0))


_BOMBS: dict[int, bytes] = {}


def compression_bomb(rng: random.Random) -> bytes:
    """A batch of a few KB whose records decompress to 100 MB, past the broker's cap (made once
    per codec: compressing 100 MB takes a while)."""
    codec = rng.choice([1, 3, 4])
    if codec not in _BOMBS:
        records = b"".join(encode_record(i, 0, b"k", b"\x00" * 100_000_000 if i == 1 else b"v", []) for i in range(3))
        _BOMBS[codec] = bytes(build_batch(records, 3, codec=codec, base_ts=0, max_ts=0))
    return _BOMBS[codec]


def bad_timestamps(rng: random.Random, batch: bytearray) -> bytearray:
    now = int(time.time() * 1000)
    struct.pack_into(">q", batch, 27, rng.choice([now + 7_200_000, now + 3_700_000, -(1 << 62), (1 << 62)]))
    return batch


def producer_fields(rng: random.Random, batch: bytearray) -> bytearray:
    struct.pack_into(">qhi", batch, 43, rng.choice([-1, -2, 0, 7, 1 << 40]), rng.choice([-1, 0, 3]),
                     rng.choice([-1, 0, 1 << 30]))
    return batch


MUTATIONS = [perturb_field, perturb_field, flip_record_bytes, cut_records, append_junk, wrong_records,
             corrupt_compressed, bad_timestamps, producer_fields]


def fuzzed_batch(rng: random.Random, now_ms: int) -> bytes:
    if rng.random() < 0.002:
        return compression_bomb(rng)
    batch = valid_batch(rng, now_ms)
    for mutation in rng.sample(MUTATIONS, rng.randrange(0, 4)):
        batch = mutation(rng, batch)
    if rng.random() < 0.7:
        fix_length(batch)
    if rng.random() < 0.9:
        fix_crc(batch)
    return bytes(batch)


# -- frames --------------------------------------------------------------------------------------

def produce_request(rng: random.Random, topic: str, partitions: int, now_ms: int) -> tuple[ProduceRequest, int]:
    chosen = rng.sample(range(partitions), rng.randrange(1, partitions + 1))
    data = tuple(PartitionProduceData(index=p, records=rng.choice([fuzzed_batch(rng, now_ms)] * 20 + [None]))
                 for p in chosen)
    acks = rng.choice([-1, -1, 1, 0])
    return ProduceRequest(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5),
                          topic_data=(TopicProduceData(name=topic, partition_data=data),)), len(chosen)


def broken_frame(rng: random.Random, topic: str, partitions: int, max_request_bytes: int) -> bytes:
    request, _ = produce_request(rng, topic, partitions, int(time.time() * 1000))
    payload = request_payload(PRODUCE, PRODUCE_V, request)
    how = rng.randrange(4)
    if how == 0:  # a frame cut short (the connection then closes)
        return sized(payload)[:rng.randrange(1, len(payload) + 4)]
    if how == 1:  # a produce body of garbage
        return sized(header_bytes(PRODUCE, PRODUCE_V) + b"\x00" + rng.randbytes(rng.randrange(0, 200)))
    if how == 2:  # a frame that says it is larger than the broker accepts
        return struct.pack(">i", max_request_bytes + rng.randrange(1, 1000)) + payload[:100]
    cut = bytearray(payload)  # a well-framed request with bytes flipped anywhere
    for _ in range(rng.randrange(1, 4)):
        cut[rng.randrange(len(cut))] ^= rng.randrange(1, 256)
    return sized(bytes(cut))


def fuzz(port: int, topic: str, partitions: int, seconds: float, seed: int,
         max_request_bytes: int = 104857600) -> FuzzReport:
    """Send fuzzed produce traffic at the broker on `port` for `seconds`."""
    rng = random.Random(seed)
    report = FuzzReport()
    deadline = time.monotonic() + seconds
    client = RawClient(port)
    try:
        while time.monotonic() < deadline:
            if rng.random() < 0.05:
                report.frames_cut_or_garbage += 1
                with RawClient(port) as victim:  # closed by us at once, or by the broker first
                    victim.send(broken_frame(rng, topic, partitions, max_request_bytes))
                continue
            request, count = produce_request(rng, topic, partitions, int(time.time() * 1000))
            report.requests += 1
            report.batches += count
            try:
                if request.acks == 0:
                    client.correlation_id += 1
                    client.send(sized(request_payload(PRODUCE, PRODUCE_V, request, client.correlation_id)))
                    continue
                response = client.call(PRODUCE, PRODUCE_V, request)
            except (BrokerClosed, ConnectionError, socket.timeout):
                report.connections_closed += 1
                client.sock.close()
                client = RawClient(port)
                continue
            for partition in response.responses[0].partition_responses:
                if partition.error_code == 0:
                    report.accepted += 1
                else:
                    report.refused[partition.error_code] += 1
    finally:
        client.sock.close()
    return report
