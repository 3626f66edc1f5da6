"""Reading Weir over the wire for Spark: partitions, offsets, and one partition's offset range.

Everything here speaks the Kafka protocol through `weir.client.ClusterClient` and nothing else
(the architecture's spark ──► protocol/client rule). Spark calls us synchronously, so:

- the driver's questions (which partitions, which offsets) each run `asyncio.run` around a fresh
  client: `discover_partitions`, `list_offsets`;
- an executor's `RangeReader` keeps one event loop and one client for the whole range and runs its
  Fetches on it (`loop.run_until_complete`), handing each answer's records back to the synchronous
  caller as they arrive, the next Fetch already sent. Nothing outlives the iteration.

Rules of the read (those of Spark's Kafka source):

- Only committed data: a consumer's ListOffsets(latest) is the high watermark, and a consumer's
  Fetch returns nothing at or above it, so every offset we plan and read is replicated to the ISR.
  With kafka.isolation.level=read_committed, latest is the last stable offset (no transaction
  still open below it), Fetch stops there too, and the records of aborted transactions are
  dropped as a Kafka consumer drops them (weir.transactions.read_committed).
- A leadership change or a dead broker is not an error: refresh metadata, back off, ask the new
  leader, until `kafkaConsumer.pollTimeoutMs` passes without progress.
- Offsets a read needs that are gone (deleted by retention, or cut by an unclean election) are data
  loss: with failOnDataLoss=true the task fails naming the partition and the range; with false we
  warn and go on from the first offset that still exists.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

from weir.client import REFRESH_ERRORS, ClientError, ClusterClient, ErrorCode, KafkaError
from weir.protocol.hot_responses import decode_fetch_response
from weir.protocol.versions import ApiKey
from weir.spark.options import EARLIEST, LATEST, OptionError, ReadOptions
from weir.spark.records import Columns, decode
from weir.transactions.read_committed import AbortedTransactionFilter

log = logging.getLogger("weir.spark")

FETCH_MAX_VERSION = 12  # topics by name (v13 switches to topic ids)
LIST_OFFSETS_MAX_VERSION = 7
FETCH_MAX_WAIT_MS = 500
MAX_METADATA_ATTEMPTS = 20
CLIENT_ID = "weir-spark"

TopicPartition = tuple[str, int]


class DataLossError(RuntimeError):
    """Offsets a query needs are no longer in the log (and failOnDataLoss is true)."""


def report_data_loss(opts: ReadOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(f"{message}. Some data may have been lost: retention deleted it or an unclean "
                            "leader election truncated it. Set failOnDataLoss=false to skip it and go on.")
    log.warning("%s; skipping them (failOnDataLoss=false)", message)


def _client(opts: ReadOptions) -> ClusterClient:
    extra = {}
    if opts.security:  # kafka.security.protocol, kafka.sasl.*, kafka.ssl.*: built where it is used (an
        from weir.security.client_config import client_security  # SSLContext does not travel to executors)
        extra["security"] = client_security(dict(opts.security))
    return ClusterClient(opts.bootstrap, client_id=CLIENT_ID, timeout_s=30, retries=5, retry_backoff_s=0.2, **extra)


# -- the driver's questions ------------------------------------------------------------------------

def discover_partitions(opts: ReadOptions) -> list[TopicPartition]:
    """The partitions the subscription takes now (assign: exactly the assigned ones)."""
    if opts.assign:
        return list(opts.assign)
    return asyncio.run(_discover(opts))


async def _discover(opts: ReadOptions) -> list[TopicPartition]:
    async with _client(opts) as client:
        await client.refresh_metadata(list(opts.subscribe) if opts.subscribe else None)
        out = []
        for name, info in client.topics.items():
            if info.is_internal or not opts.matches(name):
                continue
            out.extend((name, p) for p in info.partitions)
        return sorted(out)


def list_offsets(opts: ReadOptions, wanted: dict[TopicPartition, int],
                 unmatched: set | None = None) -> dict[TopicPartition, int]:
    """ListOffsets for each partition: EARLIEST (log start), LATEST (high watermark) or a timestamp.

    A timestamp later than every committed record resolves to the high watermark (and its partition
    goes into `unmatched`, if given).
    """
    if not wanted:
        return {}
    return asyncio.run(_list_offsets_once(opts, wanted, unmatched))


async def _list_offsets_once(opts: ReadOptions, wanted: dict[TopicPartition, int],
                             unmatched: set | None) -> dict[TopicPartition, int]:
    async with _client(opts) as client:
        return await list_offsets_with(client, opts, wanted, unmatched)


async def list_offsets_with(client: ClusterClient, opts: ReadOptions, wanted: dict[TopicPartition, int],
                            unmatched: set | None = None) -> dict[TopicPartition, int]:
    result: dict[TopicPartition, int] = {}
    pending = dict(wanted)
    no_match: dict[TopicPartition, int] = {}
    topics = sorted({t for t, _ in wanted})
    deadline = time.monotonic() + opts.poll_timeout_ms / 1000
    last_error = ""
    attempt = 0
    while pending:
        if attempt:
            if time.monotonic() > deadline:
                raise TimeoutError(f"ListOffsets did not succeed for {_names(pending)} within "
                                   f"kafkaConsumer.pollTimeoutMs ({opts.poll_timeout_ms} ms): {last_error}")
            await asyncio.sleep(min(0.1 * 2 ** attempt, 2.0))
        attempt += 1
        try:
            await client.refresh_metadata(topics)
        except (ClientError, KafkaError, OSError) as e:
            last_error = str(e)
            continue
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            info = client.topics.get(tp[0])
            if info is None or tp[1] not in info.partitions:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{tp[0]}-{tp[1]} does not exist")
            leader = client.leader_for(*tp)
            if leader is None:
                last_error = f"{tp[0]}-{tp[1]} has no leader"
                continue
            by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            body = {"replica_id": -1, "isolation_level": int(opts.read_committed), "topics": [
                {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                            "timestamp": pending[(t, p)], "max_num_offsets": 1}
                                           for tt, p in tps if tt == t]}
                for t in sorted({t for t, _ in tps})]}
            try:
                conn = await client.connection(leader)
                response = await conn.call(ApiKey.LIST_OFFSETS, body, max_version=LIST_OFFSETS_MAX_VERSION)
            except (ClientError, KafkaError, OSError) as e:
                last_error = f"broker {leader}: {e}"
                continue
            for t in response.topics:
                for p in t.partitions:
                    tp = (t.name, int(p.partition_index))
                    code = ErrorCode(p.error_code)
                    if code == ErrorCode.none:
                        spec = pending.pop(tp)
                        if p.offset < 0 and spec >= 0:
                            no_match[tp] = spec
                        else:
                            result[tp] = int(p.offset)
                    elif code in REFRESH_ERRORS:
                        last_error = f"{tp[0]}-{tp[1]}: {code.name}"
                    else:
                        raise KafkaError(code, f"ListOffsets for {tp[0]}-{tp[1]} failed: {code.name}")
    if no_match:
        if unmatched is not None:
            unmatched.update(no_match)
        result.update(await list_offsets_with(client, opts, {tp: LATEST for tp in no_match}))
    return result


def _names(tps) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps))


def resolve_starting(opts: ReadOptions, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Concrete starting offsets: earliest/latest/explicit per partition, or the first at a timestamp.

    A starting timestamp no record is at or after fails the query, or with
    startingOffsetsByTimestampStrategy=latest starts at the end (Spark's KafkaOffsetReaderAdmin.readTimestampOffsets).
    """
    unmatched: set = set()
    offsets = _resolve(opts, opts.starting, tps, unmatched)
    if unmatched and not opts.no_match_latest:
        tp = min(unmatched)
        ts = opts.starting.timestamp if opts.starting.timestamp is not None else opts.starting.timestamps[tp]
        raise OptionError(f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp {ts}: "
                          "no record is at or after it. Set startingOffsetsByTimestampStrategy=latest to start at "
                          "the end of such partitions.")
    return offsets


def resolve_ending(opts: ReadOptions, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Concrete ending offsets (exclusive); an ending timestamp no record is at or after means the end."""
    return _resolve(opts, opts.ending, tps, None)


def _resolve(opts: ReadOptions, spec, tps: list[TopicPartition], unmatched: set | None) -> dict[TopicPartition, int]:
    wanted = {}
    fixed = {}
    for tp in tps:
        if spec.timestamp is not None:
            wanted[tp] = spec.timestamp
        elif tp in spec.timestamps:
            wanted[tp] = spec.timestamps[tp]
        else:
            offset = spec.offsets.get(tp, spec.default)
            if offset >= 0:
                fixed[tp] = offset
            else:
                wanted[tp] = offset
    return {**fixed, **list_offsets(opts, wanted, unmatched)}


# -- one partition's range, on an executor ----------------------------------------------------------

class RangeReader:
    """Reads [start, end) of one partition; iterate it for `Columns`, one per Fetch that had records.

    Open and closed by the iteration itself: safe to build on the driver and pickle.
    """

    def __init__(self, opts: ReadOptions, topic: str, partition: int, start: int, end: int) -> None:
        assert 0 <= start <= end, (start, end)
        self.opts, self.topic, self.partition, self.start, self.end = opts, topic, partition, start, end

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __iter__(self) -> Iterator[Columns]:
        if self.start >= self.end:
            return
        loop = asyncio.new_event_loop()
        client = _client(self.opts)
        try:
            yield from self._read(loop, client)
        finally:
            pending = asyncio.all_tasks(loop)  # a caller that stopped early left the Fetch sent ahead
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(client.close())
            loop.close()

    def _read(self, loop: asyncio.AbstractEventLoop, client: ClusterClient) -> Iterator[Columns]:
        """The Fetch at the next position is sent before the records of the last one are handed
        over: the broker answers, and the answer crosses the socket, while Spark takes them."""
        opts, end = self.opts, self.end
        pos = self.start
        timeout_s = opts.poll_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        failures = 0
        last_error = ""
        ahead: asyncio.Task | None = None  # the Fetch at `pos`, if already sent
        while pos < end:
            if time.monotonic() > deadline:
                loop.run_until_complete(self._check_truncated(client, pos))  # data loss, or...
                raise TimeoutError(f"could not read {self.name} offsets [{pos}, {end}) within "
                                   f"kafkaConsumer.pollTimeoutMs ({opts.poll_timeout_ms} ms): {last_error or 'no data'}")
            if failures:
                time.sleep(min(0.1 * 2 ** failures, 2.0))
            fetch = ahead if ahead is not None else self._fetch(client, pos)
            ahead = None
            try:
                code, hw, records, aborted = loop.run_until_complete(fetch)
            except (ClientError, OSError, KafkaError) as e:
                failures += 1
                last_error = str(e)
                loop.run_until_complete(self._refresh(client))
                continue
            if code in REFRESH_ERRORS or code in (ErrorCode.request_timed_out, ErrorCode.not_enough_replicas):
                failures += 1
                last_error = f"{code.name} from the leader"
                loop.run_until_complete(self._refresh(client))
                continue
            if code == ErrorCode.offset_out_of_range:
                pos = loop.run_until_complete(self._out_of_range(client, pos))
                deadline = time.monotonic() + timeout_s
                continue
            if code != ErrorCode.none:
                raise KafkaError(code, f"Fetch of {self.name} at offset {pos} failed: {code.name}")
            failures = 0
            if not records:
                if hw < pos:  # a new leader whose high watermark is catching up: wait for it
                    time.sleep(0.1)
                continue  # the broker already waited FETCH_MAX_WAIT_MS for data
            keep = AbortedTransactionFilter(aborted).keep if opts.read_committed else None
            columns = decode(records, pos, end, keep, opts.include_headers)
            if columns.next_offset is None or columns.next_offset <= pos:
                continue
            pos = columns.next_offset
            deadline = time.monotonic() + timeout_s
            if pos < end:
                ahead = loop.create_task(self._fetch(client, pos))
                loop.run_until_complete(asyncio.sleep(0))  # one turn of the loop: the request is written
            if len(columns):
                yield columns

    async def _fetch(self, client: ClusterClient, pos: int):
        conn = await client.leader_connection(self.topic, self.partition)
        max_bytes = self.opts.fetch_max_bytes
        response = await conn.call(ApiKey.FETCH, {
            "replica_id": -1, "max_wait": FETCH_MAX_WAIT_MS, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": int(self.opts.read_committed), "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": self.topic, "partitions": [{
                "partition": self.partition, "current_leader_epoch": -1, "fetch_offset": pos,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""},
            max_version=FETCH_MAX_VERSION, min_version=4, timeout_s=FETCH_MAX_WAIT_MS / 1000 + 30,
            decode=decode_fetch_response)
        if response.error_code:
            return ErrorCode(response.error_code), -1, None, ()
        for topic, partitions in response.topics:
            for p in partitions:
                if topic == self.topic and p.partition_index == self.partition:
                    return ErrorCode(p.error_code), p.high_watermark, p.records or None, p.aborted or ()
        return ErrorCode.unknown_topic_or_partition, -1, None, ()

    async def _refresh(self, client: ClusterClient) -> None:
        try:
            await client.refresh_metadata([self.topic])
        except (ClientError, KafkaError, OSError) as e:
            log.debug("metadata refresh for %s failed: %s", self.name, e)
        client._forget_closed()  # a dead leader's connection: open a new one to the new leader

    async def _log_bounds(self, client: ClusterClient) -> tuple[int, int]:
        tp = (self.topic, self.partition)
        earliest = await list_offsets_with(client, self.opts, {tp: EARLIEST})
        latest = await list_offsets_with(client, self.opts, {tp: LATEST})
        return earliest[tp], latest[tp]

    async def _out_of_range(self, client: ClusterClient, pos: int) -> int:
        """Where to go on after OFFSET_OUT_OF_RANGE at `pos` (or DataLossError)."""
        earliest, latest = await self._log_bounds(client)
        if pos < earliest:
            report_data_loss(self.opts, f"{self.name}: offsets [{pos}, {min(earliest, self.end)}) are gone; "
                                        f"the log now starts at {earliest}")
            return min(earliest, self.end)
        if pos > latest:
            report_data_loss(self.opts, f"{self.name}: offsets [{pos}, {self.end}) are gone; the log was "
                                        f"truncated to end at {latest}")
            return self.end
        return pos  # the log moved between the Fetch and ListOffsets: try again

    async def _check_truncated(self, client: ClusterClient, pos: int) -> None:
        try:
            _earliest, latest = await self._log_bounds(client)
        except (ClientError, KafkaError, OSError, TimeoutError):
            return
        if latest <= pos:
            report_data_loss(self.opts, f"{self.name}: offsets [{pos}, {self.end}) never became readable; "
                                        f"the log ends at {latest}")


# -- streaming offsets as JSON ----------------------------------------------------------------------

def to_json_offsets(offsets: dict[TopicPartition, int]) -> dict:
    """{("t", 0): 23} -> {"t": {"0": 23}}: Kafka's offset JSON (and what Spark checkpoints)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(offset)
    return out


def from_json_offsets(value: dict) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, ps in (value or {}).items() for p, o in ps.items()}

