"""ZooKeeper's data as Weir stores it, pure: the cluster model (brokers, assignments, partition
states) and the znode formats and paths, apart from the kazoo client in weir/coordination."""
