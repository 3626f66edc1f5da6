"""`weir log-dirs --describe`, in the manner of Kafka's kafka-log-dirs.sh: every broker's log
directories and the size and lag of each partition in them, as Kafka's JSON.

    weir log-dirs --describe [--broker-list 0,1] [--topic-list t1,t2]
"""

from __future__ import annotations

import json

from weir.cli.common import UsageError, common_options, run_command
from weir.client import ClusterClient, check_error
from weir.protocol.versions import ApiKey


def id_list(text: str | None) -> list[int] | None:
    try:
        return None if text is None else [int(part) for part in text.split(",") if part]
    except ValueError:
        raise UsageError(f"--broker-list must be broker ids separated by commas, not {text!r}") from None


async def describe_log_dirs(client: ClusterClient, args) -> int:
    if not args.describe:
        raise UsageError("give --describe")
    await client.refresh_metadata(None)
    brokers = id_list(args.broker_list) or sorted(client.brokers)
    topics = None
    if args.topic_list:
        names = [t for t in args.topic_list.split(",") if t]
        topics = [{"topic": t, "partitions": sorted(client.topics[t].partitions)} for t in names if t in client.topics]
    print("Querying brokers for log directories information")
    described = []
    for broker_id in brokers:
        conn = await client.connection(broker_id)
        response = await conn.call(ApiKey.DESCRIBE_LOG_DIRS, {"topics": topics}, max_version=4)
        check_error(getattr(response, "error_code", 0))
        described.append({"broker": broker_id, "logDirs": [{
            "partitions": [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                            "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                           for t in result.topics for p in t.partitions],
            "error": None if result.error_code == 0 else str(result.error_code),
            "logDir": result.log_dir} for result in response.results]})
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    print(json.dumps({"brokers": described, "version": 1}, separators=(",", ":")))
    return 0


def register(sub) -> None:
    command = sub.add_parser("log-dirs", help="describe the brokers' log directories (DescribeLogDirs)")
    common_options(command, suppress=False)
    command.add_argument("--describe", action="store_true")
    command.add_argument("--broker-list", metavar="ID,ID", help="default: every broker")
    command.add_argument("--topic-list", metavar="T,T", help="default: every topic")
    command.set_defaults(func=lambda args: run_command(describe_log_dirs, args))
