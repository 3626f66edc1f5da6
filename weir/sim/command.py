"""`weir sim`: run seeds, replay one with its trace, shrink failures.

    weir sim --seeds 2000 [--jobs 2]          many seeds in parallel; seeds/s and violations
    weir sim --seed 17 --trace                one seed, its event trace, its verdict
    weir sim --scenario jepsen-unclean        a named scenario (scenarios.py)
    weir sim --mutant hw-max --seeds 200      prove the checker catches a broken rule
    weir sim --scenario transactions --seeds 1000   the transaction coordinator and partitions (txn_world.py)
    weir sim --seeds 100000                   the nightly run
"""

from __future__ import annotations

import sys

from weir.sim.mutants import MUTANTS
from weir.sim.runner import RunResult, run_many, run_seed, shrink
from weir.sim.scenarios import SCENARIOS


def register(sub) -> None:
    sim = sub.add_parser("sim", help="deterministic simulation of the replication, controller and transaction cores")
    sim.add_argument("--seeds", type=int, default=None, help="run this many seeds (from --first-seed)")
    sim.add_argument("--first-seed", type=int, default=0)
    sim.add_argument("--seed", type=int, default=None, help="run one seed")
    sim.add_argument("--trace", action="store_true", help="print the run's event trace")
    sim.add_argument("--jobs", type=int, default=None, help="processes (default: every core)")
    sim.add_argument("--scenario", choices=SCENARIOS)
    sim.add_argument("--mutant", choices=MUTANTS)
    sim.add_argument("--faults", default=None, help="replay a shrunk schedule: indices of the seed's faults to keep")
    sim.add_argument("--no-shrink", action="store_true")
    sim.set_defaults(func=main)


def _replay_command(seed: int, args, kept: list[int] | None = None) -> str:
    parts = ["weir sim", f"--seed {seed}", "--trace"]
    if args.scenario:
        parts.append(f"--scenario {args.scenario}")
    if args.mutant:
        parts.append(f"--mutant {args.mutant}")
    if kept is not None:
        parts.append(f"--faults {','.join(map(str, kept)) or 'none'}")
    return " ".join(parts)


def _print_run(result: RunResult, trace: bool) -> None:
    if trace:
        print("schedule:")
        for fault in result.schedule:
            print(f"  {fault}")
        print("trace:")
        for line in result.trace:
            print(f"  {line}")
    verdict = "ok" if result.ok else f"VIOLATION {result.violations[0].rule}: {result.violations[0].detail}"
    if hasattr(result, "committed"):  # the transactions scenario
        print(f"seed {result.seed}: {verdict} ({result.events} events, {result.sim_ms} simulated ms, "
              f"EndTxn answered OK: {result.committed} commits, {result.aborted} aborts, trace {result.trace_hash})")
        return
    print(f"seed {result.seed}: {verdict} ({result.events} events, {result.sim_ms} simulated ms, "
          f"{result.acked} acks=all writes acknowledged, {result.lost_writes} lost to unclean elections, "
          f"trace {result.trace_hash})")


def _report_failure(seed: int, args) -> None:
    result = run_seed(seed, None, None, args.mutant, args.scenario)
    if result.ok:
        return
    original = list(result.schedule)
    if not args.no_shrink:
        result = shrink(result, None, args.mutant, args.scenario)
    kept = [original.index(f) for f in result.schedule]
    cut = next((i for i, line in enumerate(result.trace) if "VIOLATION" in line), len(result.trace) - 1)
    print(f"\nseed {seed} breaks {result.violations[0].rule}; shortest schedule "
          f"({len(result.schedule)} of {len(original)} faults):")
    for fault in result.schedule:
        print(f"  {fault}")
    print("trace up to the violation:")
    for line in result.trace[:cut + 1]:
        print(f"  {line}")
    print(f"replay: {_replay_command(seed, args)}")
    print(f"replay the shrunk schedule: {_replay_command(seed, args, kept)}")


def main(args) -> int:
    if args.seed is not None or (args.scenario and args.seeds is None):
        seed = args.seed if args.seed is not None else 0
        schedule = None
        if args.faults is not None:
            full = run_seed(seed, None, None, args.mutant, args.scenario).schedule
            keep = [] if args.faults == "none" else [int(i) for i in args.faults.split(",")]
            schedule = [full[i] for i in keep]
        result = run_seed(seed, None, schedule, args.mutant, args.scenario)
        _print_run(result, args.trace)
        if not result.ok and args.faults is None and not args.trace:
            print(f"replay: {_replay_command(seed, args)}")
        return 0 if result.ok else 1
    count = args.seeds if args.seeds is not None else 100
    seeds = range(args.first_seed, args.first_seed + count)

    def progress(done, total, elapsed):
        print(f"  {done}/{total} seeds, {done / elapsed:.1f} seeds/s", file=sys.stderr, flush=True)
    summary = run_many(seeds, jobs=args.jobs, mutant=args.mutant, scenario=args.scenario, progress=progress)
    failures = summary["failures"]
    if args.scenario == "transactions":
        print(f"{summary['seeds']} seeds in {summary['elapsed_s']:.1f}s on {summary['jobs']} jobs: "
              f"{summary['seeds_per_s']:.1f} seeds/s, {summary['events']} events, {summary['acked']} EndTxn "
              f"answered OK; {len(failures)} violations")
    else:
        print(f"{summary['seeds']} seeds in {summary['elapsed_s']:.1f}s on {summary['jobs']} jobs: "
              f"{summary['seeds_per_s']:.1f} seeds/s, {summary['events']} events, {summary['acked']} acks=all writes "
              f"acknowledged, {summary['lost_writes']} lost to unclean elections; {len(failures)} violations")
    for seed, violation in failures[:20]:
        print(f"  seed {seed}: {violation.rule}: {violation.detail}")
    if failures:
        _report_failure(failures[0][0], args)
    return 1 if failures else 0
