"""Receiving size-prefixed Kafka frames without copying large ones: the framing both ends share
(the broker's client connections, and BrokerConnection's answers).

The socket reads into a fixed buffer, from which small frames are copied out; a large frame (a
Produce, a follower's Fetch answer) is read straight into a buffer of its own, which becomes the
frame: its bytes are not copied on the way. Those buffers come from a pool and serve later large
frames once nothing holds a view of them: fresh memory costs a page fault every 4 KiB, more than
the rest of receiving a large frame (docs/benchmarks.md).
"""

import asyncio
import mmap
import struct
import sys
import threading

_SIZE = struct.Struct(">i")


class BufferPool:
    """Buffers for large frames, reused once no view of them is left (a view keeps one reference
    to its buffer, however many views there are), up to `max_bytes` of them kept. One per
    thread (`for_this_thread`): a buffer is checked free and taken in one step of one loop.

    A new buffer is an anonymous mmap, not a bytearray: its pages are taken as bytes arrive, so a
    peer that announces a 100 MB frame and sends nothing more costs address space, not memory
    (a bytearray is zeroed, all of it, at once)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        # [0] is never lent: only this list refers to it, so its reference count is a free buffer's
        # (counted alike, whatever the interpreter counts: 3.14 borrows some references)
        self._buffers: list = [bytearray()]

    def take(self, size: int) -> memoryview:
        """`size` bytes, in the smallest free buffer that holds them, else in a new one (kept if
        the pool has room, or can make it by dropping free buffers)."""
        free = self._free()
        fitting = [b for b in free if len(b) >= size]
        if fitting:
            return memoryview(min(fitting, key=len))[:size]
        rounded = 1 << (size - 1).bit_length()  # a power of two: later frames of other sizes fit
        fresh = mmap.mmap(-1, rounded if rounded <= self.max_bytes else size)
        if len(fresh) <= self.max_bytes:
            kept = sum(len(b) for b in self._buffers)
            for old in sorted(free, key=len):
                if kept + len(fresh) <= self.max_bytes:
                    break
                self._buffers = [b for b in self._buffers if b is not old]  # by identity: equal bytes are not the same buffer
                kept -= len(old)
            if kept + len(fresh) <= self.max_bytes:
                self._buffers.append(fresh)
        return memoryview(fresh)[:size]

    def _free(self) -> list:
        counts = [sys.getrefcount(b) for b in self._buffers]
        return [b for b, n in zip(self._buffers[1:], counts[1:]) if n == counts[0]]

    @classmethod
    def for_this_thread(cls) -> "BufferPool":
        pool = getattr(_per_thread, "pool", None)
        if pool is None:
            pool = _per_thread.pool = cls(POOL_BYTES)
        return pool


POOL_BYTES = 64 * 1024 * 1024
_per_thread = threading.local()


class FrameReceiver(asyncio.BufferedProtocol):
    """Cuts what arrives into frames for `frame_received(frame)` (bytes, or a read-only view of a
    large frame's buffer), in order, then calls `frames_cut()`. A size outside
    MIN_FRAME..`frame_limit()` goes to `frame_refused(size, limit)` instead, and nothing after it
    is cut."""

    MIN_FRAME = 0
    READ_BUFFER = 256 * 1024
    LARGE_FRAME = 64 * 1024  # from this size a frame gets its own buffer

    def __init__(self) -> None:
        self._buffer = bytearray(self.READ_BUFFER)  # never resized: the transport holds views of it
        self._start = self._end = 0  # the bytes received and not yet cut into frames
        self._large: memoryview | None = None  # a large frame being received, and how much of it is
        self._large_filled = 0
        self._pool = BufferPool.for_this_thread()
        self._refused = False

    # -- what a subclass provides ----------------------------------------------------

    def frame_limit(self) -> int:
        raise NotImplementedError

    def frame_received(self, frame: bytes | memoryview) -> None:
        raise NotImplementedError

    def frame_refused(self, size: int, limit: int) -> None:
        raise NotImplementedError

    def frames_cut(self) -> None:
        """After the frames of one read."""

    def cutting(self) -> bool:
        """Whether to cut now; if not, what arrives is kept until the next read."""
        return True

    # -- asyncio.BufferedProtocol -----------------------------------------------------

    @property
    def incomplete_bytes(self) -> int:
        """Bytes received of a frame not yet whole, its size prefix included."""
        return 4 + self._large_filled if self._large is not None else self._end - self._start

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return self._large[self._large_filled:]
        if self._start and len(self._buffer) - self._end < self.LARGE_FRAME:
            kept = self._end - self._start  # less than a small frame: move it to the front
            self._buffer[:kept] = self._buffer[self._start:self._end]
            self._start, self._end = 0, kept
        return memoryview(self._buffer)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled == len(self._large):
                frame, self._large = self._large, None
                self.frame_received(frame.toreadonly())
                self.frames_cut()
            return
        self._end += nbytes
        if self.cutting():
            self._cut()
            self.frames_cut()

    def _cut(self) -> None:
        start, end = self._start, self._end
        with memoryview(self._buffer) as view:
            while end - start >= 4 and not self._refused:
                size = _SIZE.unpack_from(view, start)[0]
                limit = self.frame_limit()
                if size < self.MIN_FRAME or size > limit:
                    self._refused = True
                    start = end
                    self.frame_refused(size, limit)
                    break
                if end - start - 4 >= size:
                    self.frame_received(bytes(view[start + 4:start + 4 + size]))
                    start += 4 + size
                elif size >= self.LARGE_FRAME:  # the rest goes straight into its own buffer
                    have = end - start - 4
                    self._large = self._pool.take(size)
                    self._large[:have] = view[start + 4:end]
                    self._large_filled = have
                    start = end
                else:
                    break
        if start == end:  # also after a refusal, which drops the rest
            start = end = 0
        self._start, self._end = start, end
