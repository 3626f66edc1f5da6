"""`weir consumer-groups`, in the manner of Kafka's kafka-consumer-groups.sh.

    weir consumer-groups --list
    weir consumer-groups --describe --group G [--members | --state] [--verbose]     (or --all-groups)
    weir consumer-groups --delete --group G
    weir consumer-groups --delete-offsets --group G --topic T[:P,P]
    weir consumer-groups --reset-offsets --group G (--topic T[:P,P] | --all-topics)
                         (--to-earliest | --to-latest | --to-offset N | --shift-by N) [--execute]

Offsets are described with the lag to each partition's log end; a reset is only shown unless
--execute is given, and needs the group to be inactive (Empty), as Kafka's tool does. A group of
the consumer protocol (KIP-848) is described by ConsumerGroupDescribe, a classic one by
DescribeGroups, as Kafka 4's tool does; --verbose adds the consumer protocol's epochs and the
members' target assignments.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from weir.cli.common import UsageError, common_options, run_command, table
from weir.client import ClusterClient, ErrorCode, KafkaError, UnsupportedVersion, check_error
from weir.groups.consumer_protocol import assigned_partitions
from weir.protocol.versions import ApiKey

EARLIEST, LATEST = -2, -1
NO_OFFSET = -1


# -- talking to the group's coordinator and the partitions' leaders ----------------------

async def coordinator_id(client: ClusterClient, group: str) -> int:
    response = await client.call_any(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, max_version=3)
    check_error(response.error_code, response.error_message)
    if int(response.node_id) not in client.brokers:
        await client.refresh_metadata([])
    return int(response.node_id)


async def coordinator(client: ClusterClient, group: str):
    return await client.connection(await coordinator_id(client, group))


async def all_groups(client: ClusterClient) -> list[str]:
    await client.refresh_metadata([])
    names = set()
    for broker_id in sorted(client.brokers):
        conn = await client.connection(broker_id)
        response = await conn.call(ApiKey.LIST_GROUPS, {"states_filter": []}, max_version=4)
        check_error(response.error_code)
        names.update(g.group_id for g in response.groups)
    return sorted(names)


@dataclass(frozen=True)
class MemberView:
    member_id: str
    client_host: str
    client_id: str
    partitions: list[tuple[str, int]]
    epoch: int | None = None  # the consumer protocol's: the member epoch and target assignment
    target: list[tuple[str, int]] | None = None


@dataclass(frozen=True)
class GroupView:
    state: str
    strategy: str  # the classic protocol's assignment strategy, or the consumer protocol's assignor
    members: list[MemberView]
    group_epoch: int | None = None  # the consumer protocol's
    target_epoch: int | None = None


async def describe(client: ClusterClient, group: str) -> GroupView:
    """The group of either protocol: ConsumerGroupDescribe first, DescribeGroups for a classic
    group (GROUP_ID_NOT_FOUND from the first) or a broker without it."""
    conn = await coordinator(client, group)
    try:
        response = await conn.call(ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group],
                                                                    "include_authorized_operations": False},
                                   max_version=1)
    except UnsupportedVersion:
        response = None
    if response is not None and response.groups[0].error_code != ErrorCode.group_id_not_found:
        (d,) = response.groups
        check_error(d.error_code, d.error_message)

        def pairs(assignment) -> list[tuple[str, int]]:
            return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)
        return GroupView(d.group_state, d.assignor_name, [
            MemberView(m.member_id, m.client_host, m.client_id, pairs(m.assignment), m.member_epoch,
                       pairs(m.target_assignment)) for m in d.members], d.group_epoch, d.assignment_epoch)
    response = await conn.call(ApiKey.DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False},
                               max_version=5)
    (d,) = response.groups
    check_error(d.error_code)
    return GroupView(d.group_state, d.protocol_data or "", [
        MemberView(m.member_id, m.client_host, m.client_id, assigned_partitions(m.member_assignment))
        for m in d.members])


def assignment_text(pairs: list[tuple[str, int]] | None) -> str:
    """Kafka's tool's form: topic:0,1;other:2 ('-' for none)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs or []:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"


async def committed_offsets(client: ClusterClient, group: str) -> dict[tuple[str, int], int]:
    conn = await coordinator(client, group)
    response = await conn.call(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None, "require_stable": False},
                               max_version=7)
    check_error(response.error_code)
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions
            if p.committed_offset >= 0}


async def list_offsets(client: ClusterClient, keys, timestamp: int) -> dict[tuple[str, int], int]:
    """Each partition's earliest (-2) or latest (-1) offset, from its leader."""
    out = {}
    for topic, partition in keys:
        response = await client.call_leader(topic, partition, ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]},
            max_version=5, errors=lambda r: [p.error_code for t in r.topics for p in t.partitions])
        (answer,) = response.topics[0].partitions
        check_error(answer.error_code)
        out[(topic, partition)] = answer.offset
    return out


# -- the actions ---------------------------------------------------------------------------

async def list_action(client: ClusterClient, args) -> int:
    for name in await all_groups(client):
        print(name)
    return 0


async def describe_action(client: ClusterClient, args) -> int:
    groups = await all_groups(client) if args.all_groups else [require_group(args)]
    for group in groups:
        described = await describe(client, group)
        members = described.members
        epochs = args.verbose and described.group_epoch is not None
        if args.state:
            node = await coordinator_id(client, group)
            where = client.brokers[node]
            head = [group, f"{where.host}:{where.port} ({node})", described.strategy or "-", described.state]
            if epochs:
                table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                       "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
                      [head + [described.group_epoch, described.target_epoch, len(members)]])
            else:
                table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                      [head + [len(members)]])
            continue
        if not members:
            print(f"\nConsumer group '{group}' has no active members.")
        if args.members:
            columns = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            rows = [[group, m.member_id, m.client_host, m.client_id, len(m.partitions)] for m in members]
            if epochs:
                columns += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
                rows = [row + [m.epoch, assignment_text(m.partitions), described.target_epoch,
                               assignment_text(m.target)] for row, m in zip(rows, members)]
            table(columns, rows)
            continue
        owners = {key: m for m in members for key in m.partitions}
        committed = await committed_offsets(client, group)
        keys = sorted(set(committed) | set(owners))
        ends = await list_offsets(client, keys, LATEST)
        rows = []
        for key in keys:
            current, owner = committed.get(key), owners.get(key)
            rows.append([group, key[0], key[1], "-" if current is None else current, ends[key],
                         "-" if current is None else max(0, ends[key] - current),
                         owner.member_id if owner else "-", owner.client_host if owner else "-",
                         owner.client_id if owner else "-"])
        table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
               "CLIENT-ID"], rows)
    return 0


async def delete_action(client: ClusterClient, args) -> int:
    group = require_group(args)
    conn = await coordinator(client, group)
    response = await conn.call(ApiKey.DELETE_GROUPS, {"groups_names": [group]}, max_version=2)
    (result,) = response.results
    check_error(result.error_code)
    print(f"Deletion of requested consumer groups ('{group}') was successful.")
    return 0


async def delete_offsets_action(client: ClusterClient, args) -> int:
    group = require_group(args)
    keys = await chosen_partitions(client, group, args)
    topics: dict[str, list[int]] = {}
    for topic, partition in keys:
        topics.setdefault(topic, []).append(partition)
    conn = await coordinator(client, group)
    response = await conn.call(ApiKey.OFFSET_DELETE, {"group_id": group, "topics": [
        {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()]})
    check_error(response.error_code)
    rows = [[t.name, p.partition_index, "Successful" if p.error_code == ErrorCode.none
             else f"Error: {ErrorCode(p.error_code).name.upper()}"] for t in response.topics for p in t.partitions]
    failed = any(row[2] != "Successful" for row in rows)
    print(f"Request {'failed' if failed else 'succeed'} for deleting offsets from group {group}.")
    table(["TOPIC", "PARTITION", "STATUS"], rows)
    return 1 if failed else 0


async def reset_offsets_action(client: ClusterClient, args) -> int:
    group = require_group(args)
    targets = [args.to_earliest, args.to_latest, args.to_offset is not None, args.shift_by is not None]
    if sum(targets) != 1:
        raise UsageError("give one of --to-earliest, --to-latest, --to-offset N, --shift-by N")
    described = await describe(client, group)
    if args.execute and described.state not in ("Empty", "Dead"):
        raise UsageError(f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                         f"state is {described.state}.")
    keys = await chosen_partitions(client, group, args)
    earliest, latest = await list_offsets(client, keys, EARLIEST), await list_offsets(client, keys, LATEST)
    committed = await committed_offsets(client, group)
    new = {}
    for key in keys:
        if args.to_earliest:
            wanted = earliest[key]
        elif args.to_latest:
            wanted = latest[key]
        elif args.to_offset is not None:
            wanted = args.to_offset
        else:
            wanted = committed.get(key, latest[key]) + args.shift_by
        new[key] = min(max(wanted, earliest[key]), latest[key])  # Kafka's tool clamps to the log
    if args.execute:
        conn = await coordinator(client, group)
        topics: dict[str, list] = {}
        for (topic, partition), offset in new.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""})
        response = await conn.call(ApiKey.OFFSET_COMMIT, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
            max_version=8)
        for t in response.topics:
            for p in t.partitions:
                check_error(p.error_code)
    else:
        print("WARN: No action will be performed as the --execute option is missing. In a future major release, "
              "the default behavior of this command will be to prompt the user before executing the reset rather "
              "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
              "command and want to keep the current default behavior without prompting.", file=sys.stderr)
    table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [[group, t, p, o] for (t, p), o in sorted(new.items())])
    return 0


def require_group(args) -> str:
    if not args.group:
        raise UsageError("--group is required")
    return args.group


async def chosen_partitions(client: ClusterClient, group: str, args) -> list[tuple[str, int]]:
    """--topic T (every partition), --topic T:P,P, or --all-topics (those the group committed)."""
    if getattr(args, "all_topics", False):
        return sorted(await committed_offsets(client, group))
    if not args.topic:
        raise UsageError("give --topic T[:P,P]" + (" or --all-topics" if hasattr(args, "all_topics") else ""))
    keys = []
    for spec in args.topic:
        topic, _, partitions = spec.partition(":")
        if partitions:
            try:
                keys += [(topic, int(p)) for p in partitions.split(",")]
            except ValueError:
                raise UsageError(f"--topic {spec}: partitions must be numbers") from None
            continue
        await client.refresh_metadata([topic])
        info = client.topics.get(topic)
        if info is None or not info.partitions:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {topic} does not exist")
        keys += [(topic, p) for p in sorted(info.partitions)]
    return keys


ACTIONS = {"list": list_action, "describe": describe_action, "delete": delete_action,
           "delete_offsets": delete_offsets_action, "reset_offsets": reset_offsets_action}


async def consumer_groups(client: ClusterClient, args) -> int:
    chosen = [name for name in ACTIONS if getattr(args, name)]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --list, --describe, --delete, --delete-offsets, --reset-offsets")
    return await ACTIONS[chosen[0]](client, args)


def register(sub) -> None:
    command = sub.add_parser("consumer-groups", help="list, describe, delete consumer groups; reset or delete "
                                                     "their offsets")
    common_options(command, suppress=False)
    for action in ("list", "describe", "delete", "delete-offsets", "reset-offsets"):
        command.add_argument(f"--{action}", action="store_true")
    command.add_argument("--group")
    command.add_argument("--all-groups", action="store_true", help="with --describe")
    command.add_argument("--members", action="store_true", help="with --describe: the members")
    command.add_argument("--state", action="store_true", help="with --describe: state and coordinator")
    command.add_argument("--verbose", action="store_true",
                         help="with --describe --members or --state: the consumer protocol's epochs and assignments")
    command.add_argument("--topic", action="append", metavar="T[:P,P]")
    command.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every committed partition")
    command.add_argument("--to-earliest", action="store_true")
    command.add_argument("--to-latest", action="store_true")
    command.add_argument("--to-offset", type=int, metavar="N")
    command.add_argument("--shift-by", type=int, metavar="N")
    command.add_argument("--execute", action="store_true", help="with --reset-offsets: do it (default: show it)")
    command.add_argument("--dry-run", action="store_true", help="with --reset-offsets: only show it (the default)")
    command.set_defaults(func=lambda args: run_command(consumer_groups, args))
