"""`weir reassign-partitions`, in the manner of Kafka's kafka-reassign-partitions.sh.

    weir reassign-partitions --generate --topics-to-move-json-file FILE --broker-list 1,2,3
    weir reassign-partitions --execute --reassignment-json-file FILE [--throttle BYTES_PER_S]
    weir reassign-partitions --verify --reassignment-json-file FILE [--preserve-throttles]
    weir reassign-partitions --cancel --reassignment-json-file FILE
    weir reassign-partitions --list

FILE formats are Kafka's: {"topics": [{"topic": "t"}], "version": 1} to move, and
{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}
for a reassignment. --generate proposes an assignment over the listed brokers with Kafka's
placement (rack-aware unless --disable-rack-aware) and changes nothing; --execute prints the
current assignment (keep it to roll back) and starts the moves (AlterPartitionReassignments);
--verify says of each partition whether its move is completed or still in progress.

--throttle limits the moves' replication (KIP-73), as Kafka's tool does: the brokers' dynamic
leader/follower.replication.throttled.rate, and each topic's leader.replication.throttled.replicas
(the partition's current replicas) and follower.replication.throttled.replicas (those being added).
--verify clears them once every move has completed, unless --preserve-throttles.
"""

from __future__ import annotations

import json
import random
import sys

from weir.cli.common import UsageError, common_options, error_text, run_command
from weir.client import ClusterClient, ErrorCode, KafkaError
from weir.controller.assignment import AssignmentError, RackAwareMode, assign_replicas
from weir.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from weir.protocol.versions import ApiKey
from weir.zk.model import BrokerInfo

TopicPartition = tuple[str, int]
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def _read_json(path: str, shape: str) -> dict:
    try:
        with open(path) as f:
            document = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise UsageError(f"{path} is not JSON ({shape}): {e}") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path} is not {shape}")
    return document


def read_topics_to_move(path: str) -> list[str]:
    shape = '{"topics": [{"topic": ...}], "version": 1}'
    try:
        topics = [str(t["topic"]) for t in _read_json(path, shape)["topics"]]
    except (KeyError, TypeError) as e:
        raise UsageError(f"{path} is not {shape}: {e!r}") from None
    if len(set(topics)) != len(topics):
        raise UsageError(f"{path} lists a topic twice")
    return topics


def read_reassignment(path: str) -> dict[TopicPartition, tuple[int, ...]]:
    shape = '{"version": 1, "partitions": [{"topic": ..., "partition": ..., "replicas": [...]}]}'
    moves: dict[TopicPartition, tuple[int, ...]] = {}
    try:
        for entry in _read_json(path, shape)["partitions"]:
            key = (str(entry["topic"]), int(entry["partition"]))
            if key in moves:
                raise UsageError(f"{key[0]}-{key[1]} is listed twice in {path}")
            moves[key] = tuple(int(r) for r in entry["replicas"])
            log_dirs = entry.get("log_dirs", ["any"] * len(moves[key]))
            if any(d != "any" for d in log_dirs):
                raise UsageError(f"{key[0]}-{key[1]}: only log_dirs \"any\" are supported (one log directory per broker)")
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"{path} is not {shape}: {e!r}") from None
    if not moves:
        raise UsageError(f"{path} names no partition")
    return moves


def assignment_json(assignment: dict[TopicPartition, tuple[int, ...]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _names(keys) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


async def current_assignment(client: ClusterClient, topics) -> dict[TopicPartition, tuple[int, ...]]:
    await client.refresh_metadata(sorted(topics))
    missing = sorted(set(topics) - set(client.topics))
    if missing:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topics {missing} do not exist")
    return {(t, p): info.replicas for t in topics for p, info in client.topics[t].partitions.items()}


async def generate(client: ClusterClient, args) -> int:
    topics = read_topics_to_move(args.topics_to_move_json_file)
    try:
        broker_ids = [int(b) for b in args.broker_list.split(",")]
    except ValueError:
        raise UsageError(f"--broker-list {args.broker_list!r} is not a comma-separated list of broker ids") from None
    if len(set(broker_ids)) != len(broker_ids):
        raise UsageError("--broker-list names a broker twice")
    current = await current_assignment(client, topics)
    unknown = sorted(set(broker_ids) - set(client.brokers))
    if unknown:
        raise UsageError(f"brokers {unknown} are not in the cluster")
    brokers = [BrokerInfo(b, client.brokers[b].host, client.brokers[b].port, client.brokers[b].rack)
               for b in broker_ids]
    mode = RackAwareMode.DISABLED if args.disable_rack_aware else RackAwareMode.ENFORCED
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    rng = random.Random()
    for topic in topics:
        partitions = sorted(p for t, p in current if t == topic)
        try:
            placed = assign_replicas(brokers, len(partitions), len(current[(topic, partitions[0])]), rng,
                                     rack_aware_mode=mode)
        except AssignmentError as e:
            raise UsageError(f"{topic}: {e.message}") from None
        proposed.update(((topic, p), tuple(replicas)) for p, replicas in placed.items())
    print("Current partition replica assignment")
    print(assignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(assignment_json(proposed))
    return 0


async def alter_reassignments(client: ClusterClient, targets: dict[TopicPartition, tuple[int, ...] | None]) -> dict:
    """AlterPartitionReassignments at the controller → {partition: (error, message)}."""
    by_topic: dict[str, list] = {}
    for (t, p), replicas in sorted(targets.items()):
        by_topic.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
    response = await client.call_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
        "timeout": 60000, "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]})
    if response.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(response.error_code), response.error_message)
    return {(t.name, p.partition_index): (ErrorCode(p.error_code), p.error_message)
            for t in response.responses for p in t.partitions}


async def reassignments_in_progress(client: ClusterClient) -> dict[TopicPartition, tuple]:
    response = await client.call_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout": 60000, "topics": None})
    if response.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(response.error_code), response.error_message)
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in response.topics for p in t.partitions}


async def execute(client: ClusterClient, args) -> int:
    moves = read_reassignment(args.reassignment_json_file)
    current = await current_assignment(client, {t for t, _ in moves})
    unknown = sorted(key for key in moves if key not in current)
    if unknown:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no partitions {_names(unknown)}")
    print("Current partition replica assignment")
    print()
    print(assignment_json({key: current[key] for key in moves}))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None:  # before the moves start, as Kafka's tool
        await set_throttles(client, moves, current, args.throttle)
    results = await alter_reassignments(client, dict(moves))
    failed = {key: result for key, result in results.items() if result[0] != ErrorCode.none}
    if failed:
        print("Error reassigning partition(s):")
        for (t, p), (code, message) in sorted(failed.items()):
            print(f"{t}-{p}: {error_text(KafkaError(code, message))}")
        return 1
    if args.throttle is not None:
        print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
              "throttle is removed.")
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    print(f"Successfully started partition reassignment{'s' if len(moves) > 1 else ''} for {_names(moves)}")
    return 0


async def _alter_configs(client: ClusterClient, resources: list[tuple[int, str, dict[str, str | None]]]) -> None:
    """IncrementalAlterConfigs: SET each name with a value, DELETE each with None. A broker's own
    configs go to that broker, as Kafka's admin client sends them (a broker refuses another's);
    the rest to any broker."""
    by_target: dict[int | None, list] = {}
    for kind, name, configs in resources:
        target = int(name) if kind == RESOURCE_BROKER and name else None
        by_target.setdefault(target, []).append({"resource_type": kind, "resource_name": name, "configs": [
            {"name": k, "config_operation": OP_DELETE if v is None else OP_SET, "value": v}
            for k, v in sorted(configs.items())]})
    for target, body in by_target.items():
        request = {"validate_only": False, "resources": body}
        if target is None:
            response = await client.call_any(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        else:
            response = await (await client.connection(target)).call(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        for result in response.responses:
            if result.error_code != ErrorCode.none:
                raise KafkaError(ErrorCode(result.error_code), result.error_message)


async def set_throttles(client: ClusterClient, moves, current, rate: int) -> None:
    brokers = sorted({b for key in moves for b in (*moves[key], *current[key])})
    by_topic: dict[str, tuple[list[str], list[str]]] = {}
    for (t, p), target in sorted(moves.items()):
        leaders, followers = by_topic.setdefault(t, ([], []))
        leaders += [f"{p}:{b}" for b in current[(t, p)]]
        followers += [f"{p}:{b}" for b in target if b not in current[(t, p)]]
    await _alter_configs(client, [(RESOURCE_BROKER, str(b), dict.fromkeys(THROTTLE_RATES, str(rate)))
                                  for b in brokers] + [
        (RESOURCE_TOPIC, t, {"leader.replication.throttled.replicas": ",".join(leaders),
                             "follower.replication.throttled.replicas": ",".join(followers)})
        for t, (leaders, followers) in by_topic.items()])


async def clear_throttles(client: ClusterClient, topics) -> None:
    brokers = sorted(client.brokers)
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    print(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} {','.join(sorted(topics))}")
    await _alter_configs(client, [(RESOURCE_BROKER, str(b), dict.fromkeys(THROTTLE_RATES)) for b in brokers] + [
        (RESOURCE_TOPIC, t, dict.fromkeys(THROTTLED_REPLICAS)) for t in sorted(topics)])


async def verify(client: ClusterClient, args) -> int:
    moves = read_reassignment(args.reassignment_json_file)
    active = await reassignments_in_progress(client)
    current = await current_assignment(client, {t for t, _ in moves})
    print("Status of partition reassignment:")
    for (t, p), target in sorted(moves.items()):
        if (t, p) in active:
            print(f"Reassignment of partition {t}-{p} is still in progress.")
        elif current.get((t, p)) == target:
            print(f"Reassignment of partition {t}-{p} is completed.")
        else:
            replicas = ",".join(map(str, current.get((t, p), ())))
            print(f"There is no active reassignment of partition {t}-{p}, but replica set is {replicas} "
                  f"rather than {','.join(map(str, target))}.")
    if not args.preserve_throttles and not any(key in active for key in moves):
        await clear_throttles(client, {t for t, _ in moves})
    return 0


async def cancel(client: ClusterClient, args) -> int:
    moves = read_reassignment(args.reassignment_json_file)
    results = await alter_reassignments(client, dict.fromkeys(moves))
    cancelled = sorted(key for key, (code, _) in results.items() if code == ErrorCode.none)
    inactive = [key for key, (code, _) in results.items() if code == ErrorCode.no_reassignment_in_progress]
    failed = {key: r for key, r in results.items() if key not in cancelled and key not in inactive}
    if cancelled:
        print(f"Successfully cancelled partition reassignment{'s' if len(cancelled) > 1 else ''} for: "
              f"{_names(cancelled)}")
    if inactive and not cancelled:
        print("None of the specified partition moves are active.")
    for (t, p), (code, message) in sorted(failed.items()):
        print(f"{t}-{p}: {error_text(KafkaError(code, message))}")
    return 1 if failed else 0


async def list_reassignments(client: ClusterClient, args) -> int:
    active = await reassignments_in_progress(client)
    if not active:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (t, p), (replicas, adding, removing) in sorted(active.items()):
        print(f"{t}-{p}: replicas: {','.join(map(str, replicas))}. adding: {','.join(map(str, adding))}. "
              f"removing: {','.join(map(str, removing))}.")
    return 0


def _run(args) -> int:
    needs = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
             "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}
    action = next(name for name in needs if getattr(args, name))
    for option in needs[action]:
        if getattr(args, option) is None:
            print(f"Error: --{action} needs --{option.replace('_', '-')}", file=sys.stderr)
            return 1
    command = {"generate": generate, "execute": execute, "verify": verify, "cancel": cancel,
               "list": list_reassignments}[action]
    return run_command(command, args)


def register(sub) -> None:
    command = sub.add_parser("reassign-partitions", help="move partition replicas between brokers (KIP-455)")
    common_options(command, suppress=False)
    actions = command.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true", help="propose an assignment over --broker-list")
    actions.add_argument("--execute", action="store_true", help="start the moves in --reassignment-json-file")
    actions.add_argument("--verify", action="store_true", help="say whether each move has completed")
    actions.add_argument("--cancel", action="store_true", help="cancel the moves in --reassignment-json-file")
    actions.add_argument("--list", action="store_true", help="list the moves in progress")
    command.add_argument("--topics-to-move-json-file", metavar="FILE",
                         help='for --generate: {"topics": [{"topic": T}], "version": 1}')
    command.add_argument("--broker-list", metavar="ID,ID,...", help="for --generate: brokers to place replicas on")
    command.add_argument("--reassignment-json-file", metavar="FILE",
                         help='{"version": 1, "partitions": [{"topic": T, "partition": P, "replicas": [...]}]}')
    command.add_argument("--disable-rack-aware", action="store_true", help="for --generate: ignore broker racks")
    command.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                         help="for --execute: limit the moves' replication to this rate")
    command.add_argument("--preserve-throttles", action="store_true",
                         help="for --verify: keep the throttles after the moves completed")
    command.set_defaults(func=_run)
