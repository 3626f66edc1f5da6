"""`weir topics`, in the manner of Kafka's kafka-topics.sh.

    weir topics --bootstrap-server HOST:PORT create --topic T --partitions N --replication-factor R
                [--config k=v ...] [--replica-assignment 0:1,1:2] [--if-not-exists]
    weir topics list
    weir topics describe [--topic T] [--under-replicated-partitions] [--unavailable-partitions]
    weir topics delete --topic T
    weir topics alter --topic T --partitions N [--replica-assignment ...]
"""

from __future__ import annotations

import argparse
import uuid

from weir.cli.common import (UsageError, common_options, is_default, parse_key_values, parse_names, raise_for,
                             run_command)
from weir.client import ClusterClient, ErrorCode, KafkaError
from weir.protocol.config_resources import RESOURCE_TOPIC
from weir.protocol.versions import ApiKey

ZERO_UUID = uuid.UUID(int=0)


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's format: partitions separated by commas, replicas by colons: "0:1,1:2"."""
    try:
        out = [[int(b) for b in part.split(":")] for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"bad replica assignment {text!r}: expected e.g. 0:1,1:2") from None
    if not out:
        raise UsageError("empty replica assignment")
    for replicas in out:
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"replica assignment {text!r} repeats a broker within a partition")
    return out


async def topics_create(client: ClusterClient, args) -> int:
    topic = {"name": args.topic, "num_partitions": -1, "replication_factor": -1, "assignments": [],
             "configs": [{"name": k, "value": v} for k, v in parse_key_values(args.config).items()]}
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise UsageError("give --replica-assignment or --partitions/--replication-factor, not both")
        topic["assignments"] = [{"partition_index": i, "broker_ids": replicas}
                                for i, replicas in enumerate(parse_replica_assignment(args.replica_assignment))]
    else:
        if args.partitions is not None:
            topic["num_partitions"] = args.partitions
        if args.replication_factor is not None:
            topic["replication_factor"] = args.replication_factor
    response = await client.call_controller(ApiKey.CREATE_TOPICS, {
        "topics": [topic], "timeout": int(args.timeout * 1000), "validate_only": False},
        errors=lambda r: [t.error_code for t in r.topics])
    for result in response.topics:
        if result.error_code == ErrorCode.topic_already_exists and args.if_not_exists:
            continue
        raise_for(result.error_code, getattr(result, "error_message", None), f"cannot create topic {args.topic!r}")
    print(f"Created topic {args.topic}.")
    return 0


async def topics_list(client: ClusterClient, args) -> int:
    await client.refresh_metadata()
    for name in sorted(client.topics):
        if args.exclude_internal and client.topics[name].is_internal:
            continue
        print(name)
    return 0


async def topics_describe(client: ClusterClient, args) -> int:
    wanted = parse_names(args.topic) or None
    response = await client.refresh_metadata(wanted)
    for t in response.topics:
        if t.error_code != ErrorCode.none:
            if t.error_code == ErrorCode.unknown_topic_or_partition:
                raise KafkaError(ErrorCode(t.error_code), f"topic {t.name!r} does not exist")
            raise KafkaError(ErrorCode(t.error_code), f"cannot describe topic {t.name!r}")
    names = sorted(wanted or client.topics)
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    configs = {} if filtered else await _topic_overrides(client, names)
    for name in names:
        info = client.topics[name]
        if args.exclude_internal and info.is_internal:
            continue
        partitions = [info.partitions[i] for i in sorted(info.partitions)]
        if not filtered:
            rf = len(partitions[0].replicas) if partitions else 0
            topic_id = str(info.topic_id) if info.topic_id else "none"
            shown = ",".join(f"{k}={v}" for k, v in configs.get(name, []))
            print(f"Topic: {name}\tTopicId: {topic_id}\tPartitionCount: {len(partitions)}\t"
                  f"ReplicationFactor: {rf}\tConfigs: {shown}")
        for p in partitions:
            under = len(p.isr) < len(p.replicas)
            unavailable = p.leader < 0 or p.leader not in client.brokers
            if filtered and not ((args.under_replicated_partitions and under)
                                 or (args.unavailable_partitions and unavailable)):
                continue
            line = (f"\tTopic: {name}\tPartition: {p.partition}\t"
                    f"Leader: {p.leader if p.leader >= 0 else 'none'}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
            if p.offline_replicas:
                line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
            print(line)
    return 0


async def _topic_overrides(client: ClusterClient, names: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Each topic's non-default configs, as kafka-topics.sh shows them (empty if unsupported)."""
    if not names:
        return {}
    conn = await client.any_connection()
    if not conn.supports(ApiKey.DESCRIBE_CONFIGS):
        return {}
    response = await conn.call(ApiKey.DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": n, "configuration_keys": None}
                      for n in names], "include_synonyms": False, "include_documentation": False})
    out = {}
    for r in response.results:
        if r.error_code == ErrorCode.none:
            out[r.resource_name] = sorted((c.name, c.value) for c in r.configs if not is_default(c))
    return out


async def topics_delete(client: ClusterClient, args) -> int:
    names = parse_names(args.topic)
    response = await client.call_controller(ApiKey.DELETE_TOPICS, {
        "topic_names": names, "topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
        "timeout": int(args.timeout * 1000)}, errors=lambda r: [t.error_code for t in r.responses])
    failed = []
    for result in response.responses:
        code = ErrorCode(result.error_code)
        if code == ErrorCode.unknown_topic_or_partition and args.if_exists:
            continue
        if code != ErrorCode.none:
            failed.append(KafkaError(code, getattr(result, "error_message", None)
                                     or f"cannot delete topic {result.name!r}"))
        else:
            print(f"Deleted topic {result.name}.")
    if failed:
        raise failed[0]
    return 0


async def topics_alter(client: ClusterClient, args) -> int:
    if args.partitions is None:
        raise UsageError("alter needs --partitions N (the new total)")
    assignments = None
    if args.replica_assignment:
        assignments = [{"broker_ids": r} for r in parse_replica_assignment(args.replica_assignment)]
    response = await client.call_controller(ApiKey.CREATE_PARTITIONS, {
        "topics": [{"name": args.topic, "count": args.partitions, "assignments": assignments}],
        "timeout": int(args.timeout * 1000), "validate_only": False},
        errors=lambda r: [t.error_code for t in r.results])
    for result in response.results:
        raise_for(result.error_code, result.error_message, f"cannot add partitions to {args.topic!r}")
    print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


def register(sub) -> None:
    """Add `topics` and its actions to the `weir` subparsers."""
    topics = sub.add_parser("topics", help="create, list, describe, delete and alter topics")
    common_options(topics, suppress=False)
    actions = topics.add_subparsers(dest="topics_action", required=True, metavar="ACTION")

    def action(name: str, func, help: str) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help)
        common_options(p, suppress=True)
        p.set_defaults(func=lambda args: run_command(func, args))
        return p

    create = action("create", topics_create, "create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int)
    create.add_argument("--replication-factor", type=int)
    create.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)")
    create.add_argument("--replica-assignment", metavar="B:B,B:B",
                        help="replicas per partition: partitions separated by commas, brokers by colons")
    create.add_argument("--if-not-exists", action="store_true")

    lst = action("list", topics_list, "list topic names")
    lst.add_argument("--exclude-internal", action="store_true")

    describe = action("describe", topics_describe, "describe topics and their partitions")
    describe.add_argument("--topic", action="append", help="a topic (repeatable; default: all)")
    describe.add_argument("--under-replicated-partitions", action="store_true",
                          help="only partitions whose ISR is smaller than their replica set")
    describe.add_argument("--unavailable-partitions", action="store_true",
                          help="only partitions without a live leader")
    describe.add_argument("--exclude-internal", action="store_true")

    delete = action("delete", topics_delete, "delete topics")
    delete.add_argument("--topic", action="append", required=True)
    delete.add_argument("--if-exists", action="store_true")

    alter = action("alter", topics_alter, "add partitions to a topic")
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, help="the new total number of partitions")
    alter.add_argument("--replica-assignment", metavar="B:B,B:B", help="replicas of the new partitions")
