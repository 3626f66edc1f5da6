"""Receiving size-prefixed Kafka frames without copying large ones: the framing both ends share
(the broker's client connections, and BrokerConnection's answers).

The socket reads into a fixed buffer, from which small frames are copied out; a large frame (a
Produce, a follower's Fetch answer) is read straight into a buffer of its own, which becomes the
frame: its bytes are not copied on the way. That buffer serves the next large frame again once
nothing holds a view of it: fresh memory costs a page fault every 4 KiB, which cost more than
the rest of receiving the frame.
"""

import asyncio
import struct
import sys

_SIZE = struct.Struct(">i")
_UNSHARED = 2  # sys.getrefcount of an attribute nothing else refers to: it and the call's argument


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
        self._spare: bytearray | None = None  # the last large frame's buffer
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
                    self._large = self._large_buffer(size)
                    self._large[:have] = view[start + 4:end]
                    self._large_filled = have
                    start = end
                else:
                    break
        if start == end or self._refused:
            start = end = 0
        self._start, self._end = start, end

    def _large_buffer(self, size: int) -> memoryview:
        """`size` bytes to receive a large frame into: the spare buffer if it is big enough and
        no view of it is left (a view keeps one reference to it, however many views there are)."""
        if self._spare is None or len(self._spare) < size or sys.getrefcount(self._spare) > _UNSHARED:
            self._spare = bytearray(size)
        return memoryview(self._spare)[:size]
