"""KIP-951: where a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer sends the client.

As Kafka's KafkaApis does for Produce v10+ and Fetch v16+: each such partition carries
CurrentLeader, the leader and leader epoch this broker's metadata view has for it, and the
response carries NodeEndpoints, those leaders at their endpoint of the client's listener (a
leader not alive there is left out), so the client goes to the new leader without a Metadata
request first. A partition the view has no state for gets none (the field's default, -1/-1).
"""

from weir.protocol.errors import ErrorCode
from weir.protocol.hot_responses import NodeEndpoint

MOVED = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def point_to_leaders(view, listener: str, partitions) -> list[NodeEndpoint]:
    """Fill `current_leader` of each moved result in `partitions` ([(topic name, [result])], a
    result with `.index`, `.error_code` and `.current_leader`, or None: a partition an incremental
    fetch leaves out); the leaders' endpoints."""
    leaders: set[int] = set()
    for name, results in partitions:
        for result in results:
            if result is None or result.error_code not in MOVED:
                continue
            state = view.states.get((name, result.index))
            if state is None:
                continue
            result.current_leader = (state.leader, state.leader_epoch)
            leaders.add(state.leader)
    endpoints = []
    for leader in sorted(leaders):
        broker = view.brokers.get(leader)
        address = broker.address(listener) if broker is not None else None
        if address is not None:
            endpoints.append(NodeEndpoint(leader, address[0], address[1], broker.rack))
    return endpoints
