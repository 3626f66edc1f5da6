"""Admin commands in the manner of Kafka's tools: `weir topics|configs|elect-leaders|cluster`.

    weir topics --bootstrap-server HOST:PORT create --topic T --partitions N --replication-factor R
                [--config k=v ...] [--replica-assignment 0:1,1:2] [--if-not-exists]
    weir topics list
    weir topics describe [--topic T] [--under-replicated-partitions] [--unavailable-partitions]
    weir topics delete --topic T
    weir topics alter --topic T --partitions N [--replica-assignment ...]
    weir configs --entity-type topics|brokers --entity-name X --describe [--all]
    weir configs --entity-type topics|brokers --entity-name X --alter [--add-config k=v,k=v] [--delete-config k,k]
    weir configs --entity-type brokers --entity-default --alter|--describe   (the cluster-wide dynamic configs)
    weir elect-leaders --election-type PREFERRED|UNCLEAN (--topic T --partition P | --all-topic-partitions)
    weir cluster

`--bootstrap-server` (default 127.0.0.1:9092) may be given before or after the
action. A Kafka error or an unreachable broker prints one readable line on
stderr and exits with status 1; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid

from weir.client import (BrokerConnection, ClientError, ClusterClient, ErrorCode, KafkaError, UnsupportedVersion,
                     check_error)
from weir.protocol.versions import ApiKey

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
ZERO_UUID = uuid.UUID(int=0)

ALTER_CONFIGS = 33
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
DYNAMIC_SOURCES = {1, 2, 3, 6}
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


class UsageError(Exception):
    """Bad arguments found after parsing (exit status 1 with a message)."""


def error_text(e: BaseException) -> str:
    if isinstance(e, KafkaError):
        name = e.code.name.upper()
        return f"{name}: {e.message}" if e.message and e.message != e.code.name else name
    return str(e)


def raise_for(code, message: str | None, context: str) -> None:
    """KafkaError with `context` in the message unless `code` is NONE."""
    if ErrorCode(code) != ErrorCode.none:
        raise KafkaError(ErrorCode(code), message or context)


# -- argument helpers ------------------------------------------------------------

def parse_key_values(items: list[str] | None) -> dict[str, str]:
    """["k=v", "k2=v2,k3=[a,b]"] -> dict; commas inside [...] stay in the value."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in _split_top_level(item):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"bad config {part!r}: expected key=value")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


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


def _names(items: list[str] | None) -> list[str]:
    return [n for item in items or [] for n in _split_top_level(item)]


# -- running ---------------------------------------------------------------------

def run_command(command, args) -> int:
    async def go():
        from weir.security.client_config import load_command_config
        security = load_command_config(getattr(args, "command_config", None))
        client = ClusterClient(args.bootstrap_server, client_id="weir-admin", timeout_s=args.timeout,
                               retries=3, **({"security": security} if security else {}))
        try:
            return await command(client, args)
        finally:
            await client.close()
    try:
        return asyncio.run(go()) or 0
    except (KafkaError, ClientError, UsageError, ValueError) as e:
        print(f"Error: {error_text(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `weir topics list | head`
        sys.stdout = open(os.devnull, "w")
        return 1


def _broker_id(args) -> int:
    try:
        return int(args.entity_name)
    except (TypeError, ValueError):
        raise UsageError(f"broker entity name must be a broker id, not {args.entity_name!r}") from None


# -- topics -------------------------------------------------------------------------

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
    wanted = _names(args.topic) or None
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
            out[r.resource_name] = sorted((c.name, c.value) for c in r.configs if not _is_default(c))
    return out


def _is_default(entry) -> bool:
    source = getattr(entry, "config_source", None)
    if source is not None and source >= 0:
        return source not in DYNAMIC_SOURCES
    return bool(getattr(entry, "is_default", False))


async def topics_delete(client: ClusterClient, args) -> int:
    names = _names(args.topic)
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


# -- configs --------------------------------------------------------------------------

async def _config_connection(client: ClusterClient, args) -> tuple[BrokerConnection, int, str]:
    """Broker configs go to that broker; topic configs and the cluster-wide broker defaults to any."""
    if args.entity_default:
        if args.entity_type != "brokers" or args.entity_name is not None:
            raise UsageError("--entity-default is for --entity-type brokers, without --entity-name")
        return await client.any_connection(), RESOURCE_BROKER, ""
    if args.entity_name is None:
        raise UsageError("--entity-name or (for brokers) --entity-default is required")
    if args.entity_type == "brokers":
        broker_id = _broker_id(args)
        await client.refresh_metadata([])
        return await client.connection(broker_id), RESOURCE_BROKER, str(broker_id)
    return await client.any_connection(), RESOURCE_TOPIC, args.entity_name


async def configs_describe(client: ClusterClient, args) -> int:
    conn, resource_type, name = await _config_connection(client, args)
    entries = await describe_configs(conn, resource_type, name)
    kind = "topic" if resource_type == RESOURCE_TOPIC else "broker"
    shown = entries if args.all else [e for e in entries if not _is_default(e)]
    print("Default configs for brokers in the cluster are:" if args.entity_default else
          f"{'All' if args.all else 'Dynamic'} configs for {kind} {name} are:")
    for e in sorted(shown, key=lambda e: e.name):
        value = "null" if e.value is None else ("<sensitive>" if e.is_sensitive else e.value)
        source = CONFIG_SOURCES.get(getattr(e, "config_source", 0), "UNKNOWN")
        synonyms = [f"{CONFIG_SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={s.value}"
                    for s in getattr(e, "synonyms", ())] or [f"{source}:{e.name}={value}"]
        print(f"  {e.name}={value} sensitive={str(bool(e.is_sensitive)).lower()} "
              f"synonyms={{{', '.join(synonyms)}}}")
    return 0


async def describe_configs(conn: BrokerConnection, resource_type: int, name: str):
    response = await conn.call(ApiKey.DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    result = response.results[0]
    if result.error_code == ErrorCode.unknown_topic_or_partition:
        raise KafkaError(ErrorCode(result.error_code), result.error_message or f"topic {name!r} does not exist")
    raise_for(result.error_code, result.error_message, f"cannot describe configs of {name!r}")
    return list(result.configs)


async def configs_alter(client: ClusterClient, args) -> int:
    add = parse_key_values(args.add_config)
    delete = _names(args.delete_config)
    if not add and not delete:
        raise UsageError("--alter needs --add-config and/or --delete-config")
    both = set(add) & set(delete)
    if both:
        raise UsageError(f"configs both added and deleted: {', '.join(sorted(both))}")
    conn, resource_type, name = await _config_connection(client, args)
    if conn.supports(INCREMENTAL_ALTER_CONFIGS):
        ops = ([{"name": k, "config_operation": OP_SET, "value": v} for k, v in add.items()]
               + [{"name": k, "config_operation": OP_DELETE, "value": None} for k in delete])
        response = await conn.call(INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configs": ops}],
            "validate_only": False})
    elif conn.supports(ALTER_CONFIGS):
        # AlterConfigs replaces the whole set of overrides: read, modify, write back.
        current = {e.name: e.value for e in await describe_configs(conn, resource_type, name)
                   if not _is_default(e) and not getattr(e, "read_only", False)}
        missing = [k for k in delete if k not in current]
        if missing:
            raise KafkaError(ErrorCode.invalid_config, f"cannot delete {', '.join(missing)}: not set on {name}")
        for k in delete:
            current.pop(k)
        current.update(add)
        response = await conn.call(ALTER_CONFIGS, {
            "resources": [{"resource_type": resource_type, "resource_name": name,
                           "configs": [{"name": k, "value": v} for k, v in current.items()]}],
            "validate_only": False})
    else:
        raise UnsupportedVersion(f"broker {conn.host}:{conn.port} supports neither IncrementalAlterConfigs "
                                 f"nor AlterConfigs")
    for result in response.responses:
        raise_for(result.error_code, result.error_message, f"cannot alter configs of {name!r}")
    kind = "topic" if resource_type == RESOURCE_TOPIC else "broker"
    print("Completed updating default config for brokers in the cluster." if args.entity_default else
          f"Completed updating config for {kind} {name}.")
    return 0


async def configs_command(client: ClusterClient, args) -> int:
    if args.describe == args.alter:
        raise UsageError("give exactly one of --describe and --alter")
    return await (configs_describe if args.describe else configs_alter)(client, args)


# -- elect-leaders ------------------------------------------------------------------------

async def elect_leaders(client: ClusterClient, args) -> int:
    election = ELECTION_TYPES.get(args.election_type.upper())
    if election is None:
        raise UsageError(f"--election-type must be PREFERRED or UNCLEAN, not {args.election_type!r}")
    if args.all_topic_partitions:
        if args.topic or args.partition is not None:
            raise UsageError("give --all-topic-partitions or --topic/--partition, not both")
        partitions = None
    elif args.topic:
        if args.partition is None:
            raise UsageError("--topic needs --partition")
        partitions = [{"topic": args.topic, "partitions": [args.partition]}]
    else:
        raise UsageError("give --topic T --partition P or --all-topic-partitions")
    conn = await client.controller()
    # v0 knows only preferred elections.
    version = conn.pick_version(ELECT_LEADERS, None, 1 if election else 0)
    response = await conn.request(ELECT_LEADERS, version, {
        "election_type": election, "topic_partitions": partitions, "timeout": int(args.timeout * 1000)})
    raise_for(getattr(response, "error_code", 0), None, "leader election failed")
    kind = args.election_type.upper()
    elected, not_needed, failures = [], [], []
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            tp = f"{topic.topic}-{p.partition_id}"
            code = ErrorCode(p.error_code)
            if code == ErrorCode.none:
                elected.append(tp)
            elif code == ErrorCode.election_not_needed:
                not_needed.append(tp)
            else:
                failures.append((tp, KafkaError(code, p.error_message)))
    if elected:
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(elected)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    for tp, error in failures:
        print(f"Error completing leader election ({kind}) for partition: {tp}: {error_text(error)}")
    if failures:
        print(f"Error: {len(failures)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


# -- cluster ----------------------------------------------------------------------------

async def cluster(client: ClusterClient, args) -> int:
    await client.refresh_metadata([])
    conn = await client.any_connection()
    cluster_id, controller_id, brokers = client.cluster_id, client.controller_id, dict(client.brokers)
    if conn.supports(ApiKey.DESCRIBE_CLUSTER):
        response = await conn.call(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False})
        check_error(response.error_code, response.error_message)
        cluster_id, controller_id = response.cluster_id, int(response.controller_id)
        brokers = {int(b.broker_id): (b.host, int(b.port), b.rack) for b in response.brokers}
    else:
        brokers = {i: (b.host, b.port, b.rack) for i, b in brokers.items()}
    print(f"Cluster ID: {cluster_id}")
    where = brokers.get(controller_id)
    print(f"Controller: {controller_id}" + (f" ({where[0]}:{where[1]})" if where else ""))
    if client.controller_id != controller_id:
        print(f"Controller (Metadata): {client.controller_id}")
    print(f"Brokers: {len(brokers)}")
    for broker_id in sorted(brokers):
        host, port, rack = brokers[broker_id]
        print(f"  {broker_id}\t{host}:{port}\track: {rack if rack is not None else 'none'}")
    return 0


# -- registration -------------------------------------------------------------------------

def common_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        default=default if suppress else DEFAULT_BOOTSTRAP,
                        help=f"brokers to bootstrap from (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", default=default if suppress else 30.0,
                        help="request timeout in seconds (default 30)")
    parser.add_argument("--command-config", metavar="FILE", default=default if suppress else None,
                        help="Kafka client properties: security.protocol, sasl.*, ssl.* (a secured cluster)")


def register(sub) -> None:
    """Add `topics`, `configs`, `elect-leaders` and `cluster` to the `weir` subparsers."""
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

    configs = sub.add_parser("configs", help="describe or alter topic and broker configs")
    common_options(configs, suppress=False)
    configs.add_argument("--entity-type", choices=["topics", "brokers"], required=True)
    configs.add_argument("--entity-name")
    configs.add_argument("--entity-default", action="store_true",
                         help="with --entity-type brokers: the dynamic configs of every broker")
    configs.add_argument("--describe", action="store_true")
    configs.add_argument("--all", action="store_true", help="with --describe: defaults too")
    configs.add_argument("--alter", action="store_true")
    configs.add_argument("--add-config", action="append", metavar="K=V[,K=V]")
    configs.add_argument("--delete-config", action="append", metavar="K[,K]")
    configs.set_defaults(func=lambda args: run_command(configs_command, args))

    elect = sub.add_parser("elect-leaders", help="run preferred or unclean leader elections")
    common_options(elect, suppress=False)
    elect.add_argument("--election-type", required=True, metavar="PREFERRED|UNCLEAN")
    elect.add_argument("--topic")
    elect.add_argument("--partition", type=int)
    elect.add_argument("--all-topic-partitions", action="store_true")
    elect.set_defaults(func=lambda args: run_command(elect_leaders, args))

    clus = sub.add_parser("cluster", help="show the cluster id, controller and brokers")
    common_options(clus, suppress=False)
    clus.set_defaults(func=lambda args: run_command(cluster, args))
