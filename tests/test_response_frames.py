"""BrokerConnection's reader cuts whatever chunks the socket gives into the frames sent."""

import asyncio
import os
import random
import struct

from weir.client import _ResponseFrames
from weir.transport.frame_receiver import POOL_BYTES, BufferPool


class Collecting:
    host, port = "broker", 9092

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.failed = None

    def _dispatch(self, frame) -> None:
        self.frames.append(bytes(frame))

    def _fail_all(self, error) -> None:
        self.failed = error


def feed(reader: _ResponseFrames, stream: bytes, rng: random.Random) -> None:
    """Write `stream` through get_buffer / buffer_updated as a socket would, in random pieces."""
    pos = 0
    while pos < len(stream):
        buffer = reader.get_buffer(-1)
        assert len(buffer) > 0
        n = min(len(buffer), len(stream) - pos, rng.choice([1, 3, 4, 7, 1000, 70_000, 300_000]))
        buffer[:n] = stream[pos:pos + n]
        del buffer  # as the transport, which keeps no view past the call
        reader.buffer_updated(n)
        pos += n


def test_small_and_large_frames_in_any_pieces():
    async def run() -> None:
        rng = random.Random(7)
        sizes = [4, 5, 100, 65_535, 65_536, 200_000, 4, 1_000_000, 260_000, 10, 70_000] * 3
        frames = [rng.randbytes(size) for size in sizes]
        stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
        for seed in range(5):
            reader = _ResponseFrames(max_response_bytes=2_000_000)
            reader.connection = Collecting()
            feed(reader, stream, random.Random(seed))
            assert reader.connection.frames == frames
            assert reader.connection.failed is None

    asyncio.run(run())


def test_a_frame_over_the_limit_fails_the_connection():
    async def run() -> None:
        reader = _ResponseFrames(max_response_bytes=1000)
        reader.connection = Collecting()
        feed(reader, struct.pack(">i", 1001) + bytes(10), random.Random(1))
        assert "bad response size 1001" in str(reader.connection.failed)

    asyncio.run(run())


class Holding(Collecting):
    """Keeps each frame as the view it got, as a decoded answer keeps views of its records."""

    def _dispatch(self, frame) -> None:
        self.frames.append(frame)


def test_a_large_frame_still_held_is_never_received_into_again():
    async def run() -> None:
        rng = random.Random(3)
        frames = [rng.randbytes(size) for size in (100_000, 300_000, 90_000, 1_000_000, 80_000)]
        stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
        reader = _ResponseFrames(max_response_bytes=2_000_000)
        reader.connection = Holding()
        feed(reader, stream, random.Random(4))
        assert [bytes(f) for f in reader.connection.frames] == frames

    asyncio.run(run())


def test_a_large_frame_no_longer_held_lends_its_buffer_to_the_next():
    async def run() -> None:
        reader = _ResponseFrames(max_response_bytes=2_000_000)
        reader._pool = BufferPool(POOL_BYTES)  # not the thread's, which earlier tests used
        reader.connection = Holding()
        first, second = bytes(range(256)) * 1200, bytes(reversed(range(256))) * 1100  # over READ_BUFFER
        feed(reader, struct.pack(">i", len(first)) + first, random.Random(5))
        held = reader.connection.frames.pop()
        assert bytes(held) == first
        buffer_id = id(held.obj)  # not a reference: that would hold it
        del held
        feed(reader, struct.pack(">i", len(second)) + second, random.Random(6))
        [frame] = reader.connection.frames
        assert id(frame.obj) == buffer_id and bytes(frame) == second

    asyncio.run(run())


def kept(pool: BufferPool) -> list[int]:
    return sorted(len(b) for b in pool._buffers if b)  # not the empty one it measures free buffers by


def test_the_pool_keeps_at_most_its_budget_and_drops_free_buffers_first():
    pool = BufferPool(max_bytes=1 << 20)
    held = [pool.take(200_000), pool.take(200_000)]  # 256 KiB each
    assert held[0].obj is not held[1].obj, "a buffer in use is not handed out"
    spare = pool.take(300_000)  # 512 KiB: the budget is full
    assert kept(pool) == [256 * 1024, 256 * 1024, 512 * 1024]
    del spare
    big = pool.take(600_000)  # 1 MiB: the free 512 KiB goes, and still there is no room to keep it
    assert kept(pool) == [256 * 1024, 256 * 1024]
    del held
    again = pool.take(100_000)
    assert len(again.obj) == 256 * 1024, "a freed buffer serves a smaller frame"
    assert len(big) == 600_000 and kept(pool) == [256 * 1024, 256 * 1024]
    del again
    huge = pool.take(3 << 20)  # over the whole budget: never kept, so nothing is dropped for it
    assert len(huge.obj) == 3 << 20 and kept(pool) == [256 * 1024, 256 * 1024]


def test_eviction_drops_the_free_buffer_not_an_equal_one_in_use():
    pool = BufferPool(max_bytes=512 * 1024)
    held, free = pool.take(200_000), pool.take(200_000)  # 256 KiB of zeros each: equal bytes
    held_id = id(held.obj)
    del free
    pool.take(300_000)  # 512 KiB: the free one goes, and there is still no room to keep the new one
    assert [id(b) for b in pool._buffers if b] == [held_id]


def resident_bytes() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_size_prefix_alone_costs_no_memory():
    """A peer announcing a frame of 100 MB and sending nothing more: pages are taken only as
    bytes arrive (before, the broker kept only what it had received; a zeroed buffer would take
    all of it at once)."""
    async def run() -> None:
        reader = _ResponseFrames(max_response_bytes=200_000_000)
        reader._pool = BufferPool(POOL_BYTES)
        reader.connection = Collecting()
        before = resident_bytes()
        feed(reader, struct.pack(">i", 100_000_000) + bytes(100_000), random.Random(8))
        assert reader.incomplete_bytes == 100_004
        assert resident_bytes() - before < 20_000_000

    asyncio.run(run())
