"""`weir cluster`: the cluster id, the controller and the brokers (DescribeCluster, else Metadata).

    weir cluster [--bootstrap-server HOST:PORT]
"""

from __future__ import annotations

from weir.cli.common import common_options, run_command
from weir.client import ClusterClient, check_error
from weir.protocol.versions import ApiKey


async def describe_cluster(client: ClusterClient, args) -> int:
    await client.refresh_metadata([])
    conn = await client.any_connection()
    cluster_id, controller_id, brokers = client.cluster_id, client.controller_id, dict(client.brokers)
    if conn.supports(ApiKey.DESCRIBE_CLUSTER):
        response = await conn.call(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False,
                                                             "include_fenced_brokers": False})
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


def register(sub) -> None:
    """Add `cluster` to the `weir` subparsers."""
    command = sub.add_parser("cluster", help="show the cluster id, controller and brokers")
    common_options(command, suppress=False)
    command.set_defaults(func=lambda args: run_command(describe_cluster, args))
