"""The deterministic simulator (`weir sim`): the pure cores of `weir.replication` and
`weir.controller` driven through seeded fault schedules, FoundationDB/TigerBeetle style.

One seed is one reproducible run: the simulated clock and event queue (events.py), in-memory logs
that lose their unflushed tail on a crash (memlog.py), a network that delays, drops, duplicates and
partitions (network.py), a model of ZooKeeper with sessions, ephemerals, versions and one-shot
watches (zookeeper.py), brokers (broker.py with apis.py, replica_fetcher.py, isr_sender.py,
watcher.py, zk_session.py) and the controller (controller.py) as simulated I/O around the very
objects the real broker runs (weir.replication.partition.Partition, weir.controller.events),
producers and readers (clients.py), the fault schedule
(nemesis.py), the invariants checked after every step (checker.py), and the runner that ties them
together, shrinks failing schedules and runs many seeds in parallel (runner.py). Named scenarios
are in scenarios.py, deliberately broken rules in mutants.py.

`--scenario transactions` has a world of its own (txn_world.py, its invariants in txn_checker.py):
the transaction cores of `weir.transactions` (the coordinator over a simulated `__transaction_state`
that fails over, partitions with their transaction tables, verification and markers) driven by
simulated transactional producers.
"""
