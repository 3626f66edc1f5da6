"""`weir configs` for client quotas, as kafka-configs.sh does it with --bootstrap-server:

    weir configs --entity-type users|clients|ips [--entity-name N | --entity-default] --describe
    weir configs --entity-type clients --entity-name c --alter --add-config producer_byte_rate=1048576
    weir configs --entity-type users --entity-name u --entity-type clients --entity-default --alter \\
        --delete-config consumer_byte_rate

over DescribeClientQuotas and AlterClientQuotas. Each --entity-type pairs with the --entity-name
or --entity-default given in the same position; a type without either, when describing, means
every name of that type. Output and messages are kafka-configs.sh's.
"""

from __future__ import annotations

from weir.cli.common import UsageError, parse_key_values, parse_names, raise_for
from weir.client import ClusterClient, ErrorCode, KafkaError
from weir.protocol.versions import ApiKey

QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_SHOWN = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _components(types: list[str], names: list[str]) -> list[dict]:
    """The filter of the entity named: "" for a default, a type without a name for any."""
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    out = []
    for i, entity_type in enumerate(types):
        name = names[i] if i < len(names) else None
        match_type = SPECIFIED if name is None else DEFAULT if name == "" else EXACT
        out.append({"entity_type": QUOTA_ENTITY_TYPES[entity_type], "match_type": match_type,
                    "match": name or None})
    return out


def _java_double(value: float) -> str:
    """A value as Java's Double.toString writes it (kafka-configs.sh prints those)."""
    if value != 0 and not 1e-3 <= abs(value) < 1e7:
        mantissa, exponent = f"{value:.16E}".split("E")
        return f"{float(mantissa)!r}E{int(exponent)}"
    return repr(float(value))


async def _describe(client: ClusterClient, components: list[dict]):
    conn = await client.any_connection()
    response = await conn.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": True})
    raise_for(response.error_code, response.error_message, "cannot describe client quotas")
    return response.entries or ()


async def quotas_describe(client: ClusterClient, types: list[str], names: list[str]) -> int:
    for entry in await _describe(client, _components(types, names)):
        parts = {e.entity_type: e.entity_name for e in entry.entity}
        shown = ", ".join(f"{_SHOWN[t]} '{parts[t]}'" if parts[t] is not None else f"the default {_SHOWN[t]}"
                          for t in ("user", "client-id", "ip") if t in parts)
        values = ", ".join(f"{v.key}={_java_double(v.value)}" for v in sorted(entry.values, key=lambda v: v.key))
        print(f"Quota configs for {shown} are {values}")
    return 0


async def quotas_alter(client: ClusterClient, types: list[str], names: list[str], add_config, delete_config) -> int:
    if len(names) != len(types):
        raise UsageError("Exactly one entity name must be specified for every entity type")
    add = parse_key_values(add_config)
    delete = parse_names(delete_config)
    if not add and not delete:
        raise UsageError("--alter needs --add-config and/or --delete-config")
    ops = []
    for key, value in add.items():
        try:
            ops.append({"key": key, "value": float(value), "remove": False})
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
    if delete:
        entries = await _describe(client, _components(types, names))
        old = {v.key for entry in entries[:1] for v in entry.values}
        missing = [k for k in delete if k not in old]
        if missing:
            raise KafkaError(ErrorCode.invalid_config, f"Invalid config(s): {','.join(missing)}")
        ops += [{"key": key, "value": 0.0, "remove": True} for key in delete]
    entity = [{"entity_type": QUOTA_ENTITY_TYPES[t], "entity_name": n or None} for t, n in zip(types, names)]
    conn = await client.any_connection()
    response = await conn.call(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{"entity": entity, "ops": ops}],
                                                            "validate_only": False})
    for result in response.entries:
        raise_for(result.error_code, result.error_message, "cannot alter client quotas")
    print(f"Completed updating config for {types[0][:-1]} {names[0]}." if names[0] else
          f"Completed updating default config for {types[0]} in the cluster.")
    return 0
