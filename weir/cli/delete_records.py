"""`weir delete-records`, in the manner of Kafka's kafka-delete-records.sh.

    weir delete-records --bootstrap-server HOST:PORT --offset-json-file FILE

FILE is Kafka's format: {"partitions": [{"topic": "t", "partition": 0, "offset": 40}], "version": 1};
offset -1 deletes up to the high watermark. Each partition's leader is asked (DeleteRecords); the
answer comes once every live replica has moved its log start. A partition that fails is printed
with its error, and the exit status is 1.
"""

from __future__ import annotations

import json

from weir.cli.common import UsageError, common_options, error_text, run_command
from weir.client import ClusterClient, ErrorCode, KafkaError
from weir.protocol.versions import ApiKey


def read_offsets(path: str) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of each entry of a Kafka offset JSON file."""
    try:
        with open(path) as f:
            document = json.load(f)
        entries = [(str(p["topic"]), int(p["partition"]), int(p["offset"])) for p in document["partitions"]]
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path} is not an offset JSON file ({{\"partitions\": [{{\"topic\": ..., "
                         f"\"partition\": ..., \"offset\": ...}}], \"version\": 1}}): {e!r}") from None
    seen = set()
    for topic, partition, _ in entries:
        if (topic, partition) in seen:
            raise UsageError(f"{topic}-{partition} is listed twice in {path}")
        seen.add((topic, partition))
    return entries


async def delete_records(client: ClusterClient, args) -> int:
    entries = read_offsets(args.offset_json_file)
    print("Executing records delete operation")
    results = []
    for topic, partition, offset in entries:
        response = await client.call_leader(topic, partition, ApiKey.DELETE_RECORDS, {
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
            "timeout": int(args.timeout * 1000)},
            errors=lambda r: [p.error_code for t in r.topics for p in t.partitions])
        (answer,) = response.topics[0].partitions
        results.append((f"{topic}-{partition}", ErrorCode(answer.error_code), answer.low_watermark))
    print("Records delete operation completed:")
    failed = 0
    for name, code, low_watermark in results:
        if code == ErrorCode.none:
            print(f"partition: {name}\tlow_watermark: {low_watermark}")
        else:
            failed += 1
            print(f"partition: {name}\terror: {error_text(KafkaError(code, None))}")
    return 1 if failed else 0


def register(sub) -> None:
    command = sub.add_parser("delete-records", help="delete records before given offsets (DeleteRecords)")
    common_options(command, suppress=False)
    command.add_argument("--offset-json-file", required=True, metavar="FILE",
                         help='{"partitions": [{"topic": T, "partition": P, "offset": O}], "version": 1}')
    command.set_defaults(func=lambda args: run_command(delete_records, args))
