"""Consumer groups, pure: the classic protocol's state machine (group.py) and the consumer
protocol's (KIP-848: consumer_group.py, its assignors), the offsets both keep (offsets.py), the
consumer protocol's member bytes, the records kept in __consumer_offsets (records.py,
consumer_records.py) and their placement. The coordinator and its request handlers are the
broker's (weir/broker/group_*.py, consumer_group_apis.py)."""
