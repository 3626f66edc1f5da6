"""The `weir verify` command.

    weir verify [--time 60] [--nemesis mixed] [--acks all|1] [--min-isr 2] [--unclean] ...
    weir verify --matrix [--time 300] [--matrix-nemesis jepsen,kill] [--matrix-acks all] ...

Exit status: 0 when the run is valid and the cluster recovered after healing (a matrix: when every
expectation holds), 1 when not,
2 when it cannot run as asked (say, --idempotent against brokers without InitProducerId).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from weir.verify.nemesis import KINDS, MATRIX_KINDS


def _on_off(text: str) -> list[bool]:
    values = {"on": True, "true": True, "off": False, "false": False}
    return [values[v.strip().lower()] for v in text.split(",")]


def register(sub) -> None:
    p = sub.add_parser("verify", help="Jepsen-style test: real cluster, faults, history, checker, report")
    p.add_argument("--time", type=float, default=60, help="seconds of workload under faults (per run)")
    p.add_argument("--nemesis", choices=KINDS, default="mixed")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--replication", type=int, default=3)
    p.add_argument("--acks", choices=["all", "1"], default="all")
    p.add_argument("--min-isr", type=int, default=2, help="min.insync.replicas (topic and broker default)")
    p.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
    p.add_argument("--rate", type=float, default=200, help="sends per second, all producers together")
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--retries", type=int, default=0,
                   help="producer retries; with more than 0 no send failure is definite")
    p.add_argument("--idempotent", action="store_true",
                   help="idempotent producer (needs InitProducerId in the brokers); duplicates become violations")
    p.add_argument("--transactional", action="store_true",
                   help="transactional producers (some transactions aborted on purpose) and read_committed "
                        "consumers; aborted values read, partial transactions and duplicates are violations")
    p.add_argument("--seed", type=int)
    p.add_argument("--quiet", type=float, default=5, help="seconds between faults")
    p.add_argument("--fault", type=float, default=8, help="seconds a fault lasts")
    p.add_argument("--recovery", type=float, default=10, help="seconds of workload after healing")
    p.add_argument("--out", default="verify-runs", help="directory for run directories")
    p.add_argument("--name", help="run (or matrix) directory name")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    p.add_argument("--keep-data", action="store_true", help="keep the brokers' data directories")
    p.add_argument("--secure", action="store_true",
                   help="a secured cluster as `weir up --secure` runs it (SASL_SSL, SCRAM-SHA-512, ACLs, "
                        "zookeeper.set.acl); the workload is a user with prefixed ACLs on weir-verify")
    p.add_argument("--matrix", action="store_true",
                   help="every combination of unclean x min ISR x acks x nemesis, one run each")
    p.add_argument("--matrix-unclean", default="on,off")
    p.add_argument("--matrix-min-isr", default="1,2")
    p.add_argument("--matrix-acks", default="1,all")
    p.add_argument("--matrix-nemesis", default=",".join(MATRIX_KINDS))
    p.set_defaults(func=run_command)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_command(args) -> int:
    from weir.verify.report import matrix_table, summary_table
    from weir.verify.runner import NOT_RECOVERED, RunOptions, VerifyError, expectation, run_matrix, run_test

    overrides = {}
    for item in args.override:
        if "=" not in item:
            print(f"weir verify: override {item!r} is not key=value", file=sys.stderr)
            return 2
        key, value = item.split("=", 1)
        overrides[key.strip()] = value
    opts = RunOptions(time_s=args.time, nemesis=args.nemesis, brokers=args.brokers, partitions=args.partitions,
                      replication=min(args.replication, args.brokers), acks=args.acks, min_isr=args.min_isr,
                      unclean=args.unclean, rate=args.rate, producers=args.producers, consumers=args.consumers,
                      retries=args.retries, idempotent=args.idempotent,
                      transactional=args.transactional, seed=args.seed, quiet_s=args.quiet,
                      fault_s=args.fault, recovery_s=args.recovery, out=Path(args.out), name=args.name,
                      overrides=overrides, keep_data=args.keep_data, secure=args.secure)
    # Ctrl-C and SIGTERM unwind into the teardown (even where the shell started us ignoring SIGINT).
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if args.matrix:
            nemeses = [n.strip() for n in args.matrix_nemesis.split(",")]
            unknown = [n for n in nemeses if n not in KINDS]
            if unknown:
                print(f"weir verify: unknown nemesis {', '.join(unknown)}", file=sys.stderr)
                return 2

            def show(results):
                print(summary_table(results) + f"\n  expected: {expectation(results['cell']) or '-'}\n", flush=True)
            matrix = run_matrix(opts, unclean=_on_off(args.matrix_unclean),
                                min_isr=[int(v) for v in args.matrix_min_isr.split(",")],
                                acks=[v.strip() for v in args.matrix_acks.split(",")], nemeses=nemeses,
                                on_result=show)
            rows = [{"name": r["name"], "cell": r["cell"], "counts": r["result"]["counts"],
                     "stats": r["result"]["stats"], "expected": expectation(r["cell"])} for r in matrix["results"]]
            print(matrix_table(rows))
            print(f"\nreport: {matrix['dir']}/index.html")
            for failure in matrix["failures"]:
                print(f"EXPECTATION FAILED: {failure}")
            if not matrix["failures"]:
                print("every expectation holds")
            return 1 if matrix["failures"] else 0
        results = run_test(opts)
        print(summary_table(results))
        print(f"report: {results['run_dir']}/report.html")
        if not results["recovered"]:
            print(f"NOT RECOVERED: {NOT_RECOVERED}")
        return 0 if results["result"]["valid"] and results["recovered"] else 1
    except VerifyError as e:
        print(f"weir verify: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("weir verify: interrupted; everything it started is stopped", file=sys.stderr)
        return 130
