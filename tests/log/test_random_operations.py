"""Seeded random runs of appends, reads, truncations, retention, clean restarts and crashes with
a damaged tail, checked after every step against a plain model of the log."""

import os
import random

import pytest

from weir.log import LogConfig, OffsetOutOfRange, PartitionLog

from .batches import batch_crc_ok, batch_headers, make_batch, record_values

NOW = 1_000_000


class Model:
    """The batches the log should hold: (base, last, values), and the start offset."""

    def __init__(self):
        self.batches: list[tuple[int, int, list[bytes]]] = []
        self.start = 0

    @property
    def end(self):
        return self.batches[-1][1] + 1 if self.batches else self.start

    def cut(self, leo):
        self.batches = [b for b in self.batches if b[1] < leo]
        assert self.end == leo or not self.batches
        self.start = min(self.start, leo)


def check_read(log, model, rng):
    offset = rng.randint(log.log_start_offset, log.log_end_offset)
    max_offset = rng.randint(offset, log.log_end_offset)
    max_bytes = rng.choice([1, 100, 500, 5000, 1 << 20])
    data = log.read(offset, max_bytes, max_offset).read_bytes()
    headers = batch_headers(data)
    expected = [b for b in model.batches if b[1] >= offset and b[1] < max_offset]
    assert [h[:2] for h in headers] == [(b[0], b[1]) for b in expected[:len(headers)]]
    if headers:
        assert len(data) <= max_bytes or len(headers) == 1
        assert all(batch_crc_ok(data, pos) for pos in _positions(headers))
        values = dict(record_values(data))
        for base, last, vals in expected[:len(headers)]:
            assert [values[o] for o in range(base, last + 1)] == vals
    if len(headers) < len(expected):  # stopped early only for lack of room
        assert len(data) + _size(log, expected[len(headers)]) > max_bytes


def _positions(headers):
    pos = 0
    for h in headers:
        yield pos
        pos += h[3]


def _size(log, batch):
    return batch_headers(log.read(batch[0], 1, batch[1] + 1).read_bytes())[0][3]


def check_state(log, model):
    assert log.log_end_offset == model.end
    assert log.log_start_offset == max(model.start, log.segments[0].base_offset)
    assert log.log_start_offset <= log.log_end_offset


@pytest.mark.parametrize("seed", range(int(os.environ.get("WEIR_LOG_SEEDS", "24"))))
def test_random_operations_match_the_model(tmp_path, seed):
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=rng.choice([800, 1500, 1 << 20]),
                       index_interval_bytes=rng.choice([0, 200, 4096]),
                       segment_index_bytes=rng.choice([120, 1 << 20]),
                       retention_ms=-1)
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, config, NOW)
    model = Model()
    now = NOW
    for _step in range(70):
        now += rng.randint(0, 1000)
        op = rng.random()
        if op < 0.45:
            batches = [[os.urandom(rng.randint(0, 60)) for _ in range(rng.randint(1, 4))]
                       for _ in range(rng.randint(1, 3))]
            data = b"".join(make_batch(vals, timestamp=now + rng.randint(-500, 500)) for vals in batches)
            info = log.append(data, rng.randint(0, 5), now)
            offset = model.end
            assert info.first_offset == offset
            for vals in batches:
                model.batches.append((offset, offset + len(vals) - 1, vals))
                offset += len(vals)
            assert info.last_offset == model.end - 1
        elif op < 0.65:
            check_read(log, model, rng)
        elif op < 0.70 and model.batches:
            target = rng.randint(model.start, model.end)
            log.truncate_to(target)
            model.cut(log.log_end_offset)
            assert log.log_end_offset <= target
        elif op < 0.75:
            target = rng.randint(model.start, model.end)
            log.delete_records_before(target)
            model.start = max(model.start, target)
        elif op < 0.80:
            limit = rng.randint(0, 3000)
            log = _with_config(log, LogConfig(**{**config.__dict__, "retention_bytes": limit}), now)
            log.enforce_retention(now)
            # Kafka's rule: delete the oldest segment only while the rest still holds >= limit
            assert len(log.segments) == 1 or log.size_in_bytes() - log.segments[0].size < limit
            model.start = max(model.start, log.log_start_offset)
            model.batches = [b for b in model.batches if b[0] >= log.segments[0].base_offset]
        elif op < 0.87:
            log.close()
            log = PartitionLog.open(directory, config, now, log_start_offset=model.start, clean_shutdown=True)
        else:
            log = _crash_and_recover(log, directory, config, model, rng, now)
        check_state(log, model)
    check_read(log, model, rng)
    log.close()


def _with_config(log, config, now):
    log.config = config
    return log


def _crash_and_recover(log, directory, config, model, rng, now):
    """Crash, damage the tail of the last segment, recover; the model keeps the batches that
    were wholly before the damage."""
    active = log.active_segment
    base, size = active.base_offset, active.size
    layout = []  # (position, base, last) of the batches in the last segment
    pos = 0
    for h in batch_headers((directory / f"{base:020d}.log").read_bytes()[:size]):
        layout.append((pos, h[0], h[1], h[3]))
        pos += h[3]
    for segment in log.segments:
        segment.close()
    log._closed = True
    path = directory / f"{base:020d}.log"
    kind = rng.choice(["cut", "flip", "garbage"])
    survivors_end = size
    if kind == "cut" and size:
        survivors_end = rng.randint(0, size - 1)
        os.truncate(path, survivors_end)
    elif kind == "flip" and size:
        position = rng.randint(0, size - 1)
        while any(p + 12 <= position < p + 16 for p, *_ in layout):  # leader epoch is not under the CRC
            position = rng.randint(0, size - 1)
        with open(path, "r+b") as f:
            f.seek(position)
            byte = f.read(1)[0]
            f.seek(position)
            f.write(bytes([byte ^ (1 << rng.randint(0, 7))]))
        survivors_end = position
    else:
        with open(path, "ab") as f:
            f.write(os.urandom(rng.randint(1, 100)))
    leo = base
    for p, b, last, s in layout:
        if p + s <= survivors_end:
            leo = last + 1
    log = PartitionLog.open(directory, config, now, recovery_point=rng.choice([None, base]),
                            log_start_offset=model.start)
    if leo >= model.start:
        model.batches = [b for b in model.batches if b[1] < leo]
    else:  # the start offset survived in the checkpoint, the data did not: the log starts over there
        model.batches = []
    assert log.log_end_offset == model.end, kind
    return log


def test_reading_below_the_start_raises(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 1, 1)
    log.close()
