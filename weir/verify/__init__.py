"""`weir verify`: a Jepsen-style harness. Real ZooKeeper and broker processes on loopback, a
network of userspace proxies between them (network.py), a workload of real clients
(workload.py), a nemesis (nemesis.py), a recorded history (history.py), a checker (checker.py)
and reports (report.py); runner.py ties one run, or a matrix of runs, together; cli.py is the
command.
"""
