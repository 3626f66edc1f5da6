"""Consumer groups (classic protocol): the pure state machine (group), the coordinator shell,
the request handlers, and the records kept in __consumer_offsets."""
