"""Consumer groups (classic protocol), pure: the group state machine, the consumer protocol's
subscriptions and assignments, the records kept in __consumer_offsets and their placement.
The coordinator and its request handlers are the broker's (weir/broker/group_*.py)."""
