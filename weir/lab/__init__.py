"""Running Weir on one machine: `weir up` (ZooKeeper and brokers, supervised), `weir lab` (its
fault controls), and the scratch clusters the benches, `weir verify` and the tests start."""
