"""The broker's side of ZooKeeper, through kazoo: the session, registration and controller
election, the partition-state store, the metadata watcher, ACLs on znodes, producer id blocks."""
