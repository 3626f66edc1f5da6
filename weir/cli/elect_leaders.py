"""`weir elect-leaders`, in the manner of Kafka's kafka-leader-election.sh.

    weir elect-leaders --election-type PREFERRED|UNCLEAN (--topic T --partition P | --all-topic-partitions)
"""

from __future__ import annotations

import sys

from weir.cli.common import UsageError, common_options, error_text, raise_for, run_command
from weir.client import ClusterClient, ErrorCode, KafkaError
from weir.protocol.versions import ApiKey

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


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
    version = conn.pick_version(ApiKey.ELECT_LEADERS, None, 1 if election else 0)
    response = await conn.request(ApiKey.ELECT_LEADERS, version, {
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


def register(sub) -> None:
    """Add `elect-leaders` to the `weir` subparsers."""
    command = sub.add_parser("elect-leaders", help="run preferred or unclean leader elections")
    common_options(command, suppress=False)
    command.add_argument("--election-type", required=True, metavar="PREFERRED|UNCLEAN")
    command.add_argument("--topic")
    command.add_argument("--partition", type=int)
    command.add_argument("--all-topic-partitions", action="store_true")
    command.set_defaults(func=lambda args: run_command(elect_leaders, args))
