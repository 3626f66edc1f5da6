"""`weir configs`, in the manner of Kafka's kafka-configs.sh for topics and brokers.

    weir configs --entity-type topics|brokers --entity-name X --describe [--all]
    weir configs --entity-type topics|brokers --entity-name X --alter [--add-config k=v,k=v] [--delete-config k,k]
    weir configs --entity-type brokers --entity-default --alter|--describe   (the cluster-wide dynamic configs)
    weir configs --entity-type users|clients|ips ...   (client quotas: weir.cli.quota_configs)
"""

from __future__ import annotations

from weir.cli.common import (UsageError, common_options, is_default, parse_key_values, parse_names, raise_for,
                             run_command)
from weir.cli.quota_configs import QUOTA_ENTITY_TYPES, quotas_alter, quotas_describe
from weir.client import BrokerConnection, ClusterClient, ErrorCode, KafkaError, UnsupportedVersion
from weir.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from weir.protocol.versions import ApiKey

CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


def _broker_id(args) -> int:
    try:
        return int(args.entity_name)
    except (TypeError, ValueError):
        raise UsageError(f"broker entity name must be a broker id, not {args.entity_name!r}") from None


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
    shown = entries if args.all else [e for e in entries if not is_default(e)]
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
    delete = parse_names(args.delete_config)
    if not add and not delete:
        raise UsageError("--alter needs --add-config and/or --delete-config")
    both = set(add) & set(delete)
    if both:
        raise UsageError(f"configs both added and deleted: {', '.join(sorted(both))}")
    conn, resource_type, name = await _config_connection(client, args)
    if conn.supports(ApiKey.INCREMENTAL_ALTER_CONFIGS):
        ops = ([{"name": k, "config_operation": OP_SET, "value": v} for k, v in add.items()]
               + [{"name": k, "config_operation": OP_DELETE, "value": None} for k in delete])
        response = await conn.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configs": ops}],
            "validate_only": False})
    elif conn.supports(ApiKey.ALTER_CONFIGS):
        # AlterConfigs replaces the whole set of overrides: read, modify, write back.
        current = {e.name: e.value for e in await describe_configs(conn, resource_type, name)
                   if not is_default(e) and not getattr(e, "read_only", False)}
        missing = [k for k in delete if k not in current]
        if missing:
            raise KafkaError(ErrorCode.invalid_config, f"cannot delete {', '.join(missing)}: not set on {name}")
        for k in delete:
            current.pop(k)
        current.update(add)
        response = await conn.call(ApiKey.ALTER_CONFIGS, {
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
    types, names = args.entity_type, args.entity_names or []
    if all(t in QUOTA_ENTITY_TYPES for t in types):
        if args.describe:
            return await quotas_describe(client, types, names)
        return await quotas_alter(client, types, names, args.add_config, args.delete_config)
    if len(types) > 1 or len(names) > 1:
        raise UsageError("one --entity-type and one --entity-name (or --entity-default) for topics and brokers")
    args.entity_type = types[0]
    args.entity_name = names[0] if names and names[0] else None
    args.entity_default = names == [""]
    return await (configs_describe if args.describe else configs_alter)(client, args)


def register(sub) -> None:
    """Add `configs` to the `weir` subparsers."""
    command = sub.add_parser("configs", help="describe or alter topic and broker configs, and client quotas")
    common_options(command, suppress=False)
    command.add_argument("--entity-type", choices=["topics", "brokers", *QUOTA_ENTITY_TYPES], action="append",
                         required=True, help="repeated for a user and client id: users, then clients")
    # names and defaults in one list, in the order given: each pairs with the --entity-type at its position
    command.add_argument("--entity-name", action="append", dest="entity_names")
    command.add_argument("--entity-default", action="append_const", const="", dest="entity_names",
                         help="brokers: the dynamic configs of every broker; users, clients, ips: the default quota")
    command.add_argument("--describe", action="store_true")
    command.add_argument("--all", action="store_true", help="with --describe: defaults too")
    command.add_argument("--alter", action="store_true")
    command.add_argument("--add-config", action="append", metavar="K=V[,K=V]")
    command.add_argument("--delete-config", action="append", metavar="K[,K]")
    command.set_defaults(func=lambda args: run_command(configs_command, args))
