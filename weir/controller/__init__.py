"""The pure controller core: replica assignment (assignment.py), the election and ISR rules of one
partition (partition_change.py), and the cluster-wide decisions built from them (decisions.py).
No sockets, files, clocks or threads: the shell feeds events and writes the decided states with a
compare-and-set on the partition epoch. See each module's header for the rules it owns."""

from weir.controller.assignment import (AssignmentError, RackAwareMode, assign_added_partitions, assign_replicas,
                                        rack_alternated_brokers, validate_manual_assignment)
from weir.controller.decisions import (UNCLEAN_LEADER_ELECTION_ENABLE, AlterPartitionOutcome, ControlledShutdownOutcome,
                                       ControllerConfig, ControllerCore, ElectLeadersOutcome, StateChange,
                                       TopicDeletion)
from weir.controller.partition_change import (ElectionType, elect_leader, elect_preferred_leader, elect_unclean_leader,
                                              initial_state, next_state)

__all__ = [
    "AlterPartitionOutcome", "AssignmentError", "ControlledShutdownOutcome", "ControllerConfig", "ControllerCore",
    "ElectLeadersOutcome", "ElectionType", "RackAwareMode", "StateChange", "TopicDeletion",
    "UNCLEAN_LEADER_ELECTION_ENABLE", "assign_added_partitions", "assign_replicas", "elect_leader",
    "elect_preferred_leader", "elect_unclean_leader", "initial_state", "next_state", "rack_alternated_brokers",
    "validate_manual_assignment",
]
