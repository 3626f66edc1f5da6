"""ZooKeeper coordination: a locally managed ZooKeeper server and the client side brokers use."""
