"""`weir bench WORKLOAD`: which module runs it, on which Python."""

from weir.bench.clusters import bench_clusters, interpreter
from weir.bench.leader import bench_leader
from weir.bench.scale import bench_scale


def run_bench(args) -> int:
    print(f"brokers and clients on {interpreter()}")
    return {"leader": bench_leader, "scale": bench_scale}.get(args.workload, bench_clusters)(args)
