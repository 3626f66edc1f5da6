"""The `weir` command."""

import argparse
import asyncio
import logging
import os
import sys

from weir.config.broker_config import BrokerConfig
from weir.config.settings import ConfigError


def _broker(args) -> int:
    from weir.broker.server import Broker
    try:
        config = BrokerConfig.load(args.config, args.override)
        broker = Broker(config)  # reads key stores and JAAS settings
    except (ConfigError, OSError) as e:
        print(f"weir: {e}", file=sys.stderr)
        return 2
    run_event_loop(broker.run_until_signalled())
    return 0


def run_event_loop(main) -> None:
    """The standard asyncio loop; uvloop with WEIR_EVENT_LOOP=uvloop, if installed (`weir bench
    loops` found it no faster: its transports give up the zero-copy sendfile of large fetch
    answers; docs/benchmarks.md)."""
    if os.environ.get("WEIR_EVENT_LOOP") == "uvloop":
        import uvloop
        uvloop.run(main)
    else:
        asyncio.run(main)


def _counts(text: str) -> list[int]:
    """"1000,3000" -> [1000, 3000]."""
    return [int(n) for n in text.split(",")]


def _bench(args) -> int:
    from weir.bench.command import run_bench
    return run_bench(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="weir", description="Weir: a Kafka-compatible commit log.")
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run one broker in the foreground")
    broker.add_argument("config", nargs="?", help="server.properties file")
    broker.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a broker setting, overriding the file")
    broker.set_defaults(func=_broker)

    from weir.lab import up
    up.register(sub)
    from weir.console import server as console
    console.register(sub)

    bench = sub.add_parser("bench", help="measure throughput and latency with confluent-kafka")
    bench.add_argument("workload", nargs="?", default="all",
                       choices=["all", "produce", "consume", "replication", "loops", "compare", "sessions", "spark",
                                "leader", "scale"])
    bench.add_argument("--against", metavar="SOURCE_TREE",
                       help="compare: the other Weir source tree (a git worktree of another commit, say)")
    bench.add_argument("--against-python", metavar="PYTHON", default=sys.executable,
                       help="compare: the interpreter that runs the other tree's brokers (a venv's bin/python "
                            "with Weir's dependencies; default: this one)")
    bench.add_argument("--records", type=int, default=1_000_000)
    bench.add_argument("--record-size", type=int, default=100)
    bench.add_argument("--rounds", type=int, default=3)
    bench.add_argument("--idle-partitions", type=int,
                       help="sessions (default 300) and compare (default 0): partitions of an RF=3 topic beside the "
                            "6 written, which nobody writes")
    bench.add_argument("--idle-topics", type=int, default=0,
                       help="compare: topics of one partition beside the one written, which nobody writes")
    bench.add_argument("--partitions", type=_counts, default=[1000, 3000, 10000],
                       metavar="N[,N...]", help="scale: the sizes, in RF=3 partitions (a fresh cluster for each)")
    bench.add_argument("--batch", type=int, default=100, help="scale: partitions per CreateTopics (a topic each)")
    bench.add_argument("--idle-seconds", type=float, default=10,
                       help="scale: the window over which the idle brokers' CPU is measured")
    bench.set_defaults(func=_bench)

    # -- admin tools: one module per command in weir/cli/, their shared helpers in weir/cli/common.py --
    from weir.cli import (acls, cluster, configs, consumer_groups, delete_records, elect_leaders, log_dirs,
                          reassign_partitions, topics, transactions, users)
    for command in (topics, configs, elect_leaders, cluster, delete_records, consumer_groups, transactions, log_dirs,
                    reassign_partitions, users, acls):
        command.register(sub)
    # -- end admin tools --

    # -- deterministic simulator: weir sim (weir/sim/command.py) --
    from weir.sim.command import register as register_sim_command
    register_sim_command(sub)
    # -- end simulator --

    # -- verify: the Jepsen-style harness (weir/verify/) --
    from weir.verify.cli import register as register_verify_command
    register_verify_command(sub)
    # -- end verify --

    # -- demo: weir demo pipeline, Weir -> Spark -> Parquet (weir/spark/demo.py) --
    from weir.spark.demo import register as register_demo_command
    register_demo_command(sub)
    # -- end demo --

    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.func(args)


def console() -> int:
    """The `weir` command, and `python -m weir.cli.main` (how LocalCluster starts brokers). kio registers
    Hypothesis strategies for its types whenever Hypothesis imports (a test dependency of ours):
    CPU at every start for nothing a broker or a command uses (docs/benchmarks.md). Only here: an importer of
    weir.cli.main (a test) may need Hypothesis."""
    sys.modules.setdefault("hypothesis", None)
    return main()


if __name__ == "__main__":
    sys.exit(console())
