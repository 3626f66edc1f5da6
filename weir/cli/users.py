"""`weir users`: SCRAM users, in the manner of Kafka's `kafka-configs --entity-type users`.

    weir users --bootstrap-server 127.0.0.1:9092 --command-config admin.properties \\
        --alter --entity-name alice --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    weir users ... --alter --entity-name alice --delete-config SCRAM-SHA-512
    weir users ... --describe [--entity-name alice]

Over the wire with AlterUserScramCredentials / DescribeUserScramCredentials (the password is salted
here; the broker never sees it). `--zookeeper HOST:PORT[/chroot]` instead writes ZooKeeper
directly, as `kafka-configs --zookeeper` did: the way to create the first user of a cluster whose
brokers themselves authenticate with SCRAM. With `zookeeper.set.acl` on, it logs in as the
brokers do: `--zk-config-file` names a properties file with their `zookeeper.set.acl` and
`zookeeper.digest.jaas.config` (`weir up --secure` writes `<data-dir>/tls/zookeeper.properties`).
"""

import os
import re
import sys

from weir.cli.common import UsageError, common_options, error_text, run_command
from weir.client import ClientError, ClusterClient, KafkaError
from weir.protocol.errors import ErrorCode
from weir.protocol.scram import MECHANISM_TYPE_OF, MECHANISM_TYPES, MIN_ITERATIONS, ScramCredential, salted_password
from weir.protocol.versions import ApiKey

_ITEM = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[([^\]]*)\]\s*(?:,|$)")


def parse_add_config(text: str) -> dict[str, tuple[str, int]]:
    """'SCRAM-SHA-512=[iterations=8192,password=pw],SCRAM-SHA-256=[password=pw]' → {mechanism: (password, iterations)}."""
    out, position = {}, 0
    while position < len(text):
        match = _ITEM.match(text, position)
        if not match:
            raise UsageError(f"--add-config: expected SCRAM-SHA-256=[password=...] or SCRAM-SHA-512=[...], "
                             f"got {text[position:][:40]!r}")
        options = dict(item.split("=", 1) for item in match.group(2).split(",") if "=" in item)
        if "password" not in options:
            raise UsageError(f"--add-config: {match.group(1)} needs password=...")
        out[match.group(1)] = (options["password"], int(options.get("iterations", MIN_ITERATIONS)))
        position = match.end()
    return out


def _upsertion(user: str, mechanism: str, password: str, iterations: int) -> dict:
    salt = os.urandom(32)
    return {"name": user, "mechanism": MECHANISM_TYPE_OF[mechanism], "iterations": iterations, "salt": salt,
            "salted_password": salted_password(mechanism, password, salt, iterations)}


async def users_command(client: ClusterClient, args) -> int:
    conn = await client.any_connection()
    if args.describe:
        users = [{"name": args.entity_name}] if args.entity_name else None
        response = await conn.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": users})
        if response.error_code:
            raise KafkaError(ErrorCode(response.error_code), response.error_message)
        for result in response.results:
            if result.error_code:
                raise KafkaError(ErrorCode(result.error_code), result.error_message)
            infos = ", ".join(f"{MECHANISM_TYPES.get(int(i.mechanism), i.mechanism)}-iterations={i.iterations}"
                              for i in result.credential_infos)
            print(f"SCRAM credential configs for user-principal '{result.user}' are {infos}")
        return 0
    if not args.entity_name:
        raise UsageError("--alter needs --entity-name")
    upsertions = [_upsertion(args.entity_name, m, pw, i) for m, (pw, i) in parse_add_config(args.add_config or "").items()]
    deletions = [{"name": args.entity_name, "mechanism": MECHANISM_TYPE_OF[m.strip()]}
                 for m in (args.delete_config or "").split(",") if m.strip()]
    if not upsertions and not deletions:
        raise UsageError("--alter needs --add-config or --delete-config")
    response = await conn.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": deletions, "upsertions": upsertions})
    for result in response.results:
        if result.error_code:
            raise KafkaError(ErrorCode(result.error_code), result.error_message)
    print(f"Completed updating config for user {args.entity_name}.")
    return 0


def users_in_zookeeper(args) -> int:
    from pathlib import Path

    from kazoo.exceptions import NoAuthError

    from weir.config.broker_config import read_properties
    from weir.coordination.zk_security import ZkSecurity
    from weir.security.scram_store import write_credential
    if not args.alter or not args.entity_name or not args.add_config:
        raise UsageError("--zookeeper takes --alter --entity-name NAME --add-config ...")
    props = read_properties(Path(args.zk_config_file).read_text()) if args.zk_config_file else {}
    client = ZkSecurity.from_properties(props).client(args.zookeeper)
    client.start(timeout=30)
    try:
        for mechanism, (password, iterations) in parse_add_config(args.add_config).items():
            write_credential(client, args.entity_name, mechanism,
                             ScramCredential.from_password(mechanism, password, os.urandom(32), iterations))
    except NoAuthError:
        raise UsageError("ZooKeeper refused: the cluster's znodes are protected (zookeeper.set.acl); "
                         "--zk-config-file names the brokers' ZooKeeper login") from None
    finally:
        client.stop()
        client.close()
    print(f"Completed updating config for user {args.entity_name}.")
    return 0


def run(args) -> int:
    try:
        if args.zookeeper:
            return users_in_zookeeper(args)
        return run_command(users_command, args)
    except (UsageError, ValueError, KafkaError, ClientError, OSError) as e:
        print(f"Error: {error_text(e)}", file=sys.stderr)
        return 1


def register(sub) -> None:
    command = sub.add_parser("users", help="add, change, delete and describe SCRAM users (kafka-configs --entity-type users)")
    common_options(command, suppress=False)
    action = command.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    command.add_argument("--entity-name", metavar="USER")
    command.add_argument("--add-config", metavar="'SCRAM-SHA-512=[password=...]'",
                         help="credentials to set: SCRAM-SHA-256 and/or SCRAM-SHA-512, each [iterations=N,password=P]")
    command.add_argument("--delete-config", metavar="SCRAM-SHA-512[,SCRAM-SHA-256]", help="credentials to remove")
    command.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", default=None,
                         help="write ZooKeeper directly (the first user of a SCRAM cluster)")
    command.add_argument("--zk-config-file", metavar="FILE", default=None,
                         help="with --zookeeper: zookeeper.set.acl and zookeeper.digest.jaas.config, as the brokers "
                              "have them (weir up --secure: <data-dir>/tls/zookeeper.properties)")
    command.set_defaults(func=run)
