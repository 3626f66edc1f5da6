"""One test run, and the matrix of runs.

A run: start ZooKeeper, the proxies and the brokers; create the topic; run the workload while the
nemesis injects faults for `time_s`; heal everything; let the workload run on for `recovery_s`
(and until every partition has a leader and a full ISR, or a minute passes); stop producing; read
every partition to its end; tear everything down; check the history; write the report.

Everything a run leaves is in its directory:

    <out>/<name>/history.jsonl    every operation (see history.py)
    <out>/<name>/results.json     options, checker result, timings
    <out>/<name>/report.html      summary, anomalies, throughput and latency over time
    <out>/<name>/broker-N.log     each broker's output;  zookeeper/  ZooKeeper's logs
    <out>/<name>/clients.log      librdkafka's log lines (the workload's clients)
    <out>/<name>/data/            the brokers' logs (deleted unless keep_data)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import NewTopic

from weir.protocol.versions import ApiKey
from weir.verify.checker import LOST_WRITE, check
from weir.verify.cluster import Cluster
from weir.verify.history import History
from weir.verify.nemesis import MATRIX_KINDS, Nemesis
from weir.verify.report import write_matrix_report, write_run_report
from weir.verify.txn_workload import TransactionalWorkload
from weir.verify.workload import Workload, rdkafka_log

log = logging.getLogger(__name__)

TOPIC = "weir-verify"
RECOVERY_WAIT_S = 60
NOT_RECOVERED = f"some partition had no leader or not a full ISR {RECOVERY_WAIT_S} s after every fault healed"
IDEMPOTENT_RETRIES = 2147483647  # librdkafka's default


class VerifyError(RuntimeError):
    """The run cannot be made as asked (a readable reason, not a crash)."""


@dataclass
class RunOptions:
    time_s: float = 60
    nemesis: str = "mixed"
    brokers: int = 3
    partitions: int = 3
    replication: int = 3
    acks: str = "all"
    min_isr: int = 2
    unclean: bool = False
    rate: float = 200
    producers: int = 2
    consumers: int = 2
    retries: int = 0
    idempotent: bool = False
    transactional: bool = False
    seed: int | None = None
    quiet_s: float = 5
    fault_s: float = 8
    recovery_s: float = 10
    out: Path = Path("verify-runs")
    name: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    keep_data: bool = False
    secure: bool = False

    def cell(self) -> dict:
        return {"unclean": self.unclean, "min_isr": self.min_isr, "acks": self.acks, "nemesis": self.nemesis}

    def default_name(self) -> str:
        return (f"{time.strftime('%Y%m%dT%H%M%S')}-{self.nemesis}-unclean-{'on' if self.unclean else 'off'}"
                f"-minisr{self.min_isr}-acks{self.acks}{'-secure' if self.secure else ''}")


def _broker_supports(cluster: Cluster, api_key: int) -> bool:
    from weir.client import BrokerConnection

    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)

    async def ask() -> bool:
        async with await BrokerConnection.open(host, int(port), timeout_s=10, security=cluster.client_security) as conn:
            await conn.api_versions()
            return conn.supports(api_key)
    return asyncio.run(ask())


def _create_topic(cluster: Cluster, opts: RunOptions) -> None:
    config = {"min.insync.replicas": str(opts.min_isr),
              "unclean.leader.election.enable": "true" if opts.unclean else "false"}
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, opts.partitions, opts.replication, config=config)])[TOPIC].result(30)
    _wait_healthy(cluster, opts, timeout_s=30)


def _healthy(metadata, opts: RunOptions) -> bool:
    topic = metadata.topics.get(TOPIC)
    if topic is None or topic.error is not None or len(topic.partitions) != opts.partitions:
        return False
    return all(p.leader >= 0 and set(p.isrs) == set(p.replicas) for p in topic.partitions.values())


def _wait_healthy(cluster: Cluster, opts: RunOptions, timeout_s: float) -> bool:
    try:
        cluster.wait_until(lambda md: _healthy(md, opts), "every partition led with a full ISR", timeout_s)
        return True
    except TimeoutError:
        return False


def run_test(opts: RunOptions, interrupted: threading.Event | None = None) -> dict:
    """One run; returns its results (also in results.json). Raises VerifyError if it cannot run."""
    if opts.replication > opts.brokers:
        raise VerifyError(f"replication factor {opts.replication} needs at least as many brokers ({opts.brokers})")
    if opts.idempotent and opts.retries == 0:
        # An idempotent producer retries by design (librdkafka refuses retries=0 with it); no
        # send failure is then definite but a local refusal.
        opts = dataclasses.replace(opts, retries=IDEMPOTENT_RETRIES)
    seed = opts.seed if opts.seed is not None else random.randrange(2**32)
    name = opts.name or opts.default_name()
    run_dir = Path(opts.out) / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    interrupted = interrupted or threading.Event()
    history = History(run_dir / "history.jsonl")
    client_log = logging.FileHandler(run_dir / "clients.log")
    client_log.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    rdkafka_log.addHandler(client_log)
    settings = {"min.insync.replicas": str(opts.min_isr),
                "unclean.leader.election.enable": "true" if opts.unclean else "false",
                **({"transaction.state.log.replication.factor": str(opts.replication),
                    "transaction.state.log.min.isr": str(min(opts.min_isr, opts.replication))}
                   if opts.transactional else {}),
                **opts.overrides}
    cluster = Cluster(run_dir, opts.brokers, settings, opts.secure)
    workload = nemesis = None
    timings: dict[str, float] = {}
    recovered = False
    started = time.monotonic()
    try:
        try:
            cluster.start()
        except (RuntimeError, TimeoutError, OSError) as e:  # ZooKeeper missing, a broker that would not start
            raise VerifyError(f"the cluster did not start: {e} (logs in {run_dir})") from e
        timings["cluster_started"] = history.now()
        if opts.idempotent and not _broker_supports(cluster, ApiKey.INIT_PRODUCER_ID):
            raise VerifyError("--idempotent: the brokers do not implement InitProducerId (api key 22) yet, "
                              "so an idempotent producer cannot run against them")
        _create_topic(cluster, opts)
        if opts.transactional:
            workload = TransactionalWorkload(cluster.workload_connection, history, TOPIC, opts.partitions, rate=opts.rate,
                                             producers=opts.producers, consumers=opts.consumers, seed=seed).start()
        else:
            workload = Workload(cluster.workload_connection, history, TOPIC, opts.partitions, acks=opts.acks, rate=opts.rate,
                                producers=opts.producers, consumers=opts.consumers, retries=opts.retries,
                                idempotent=opts.idempotent).start()
        nemesis = Nemesis(cluster, history, TOPIC, opts.nemesis, random.Random(seed), opts.quiet_s, opts.fault_s)
        stop_faults = threading.Event()
        nemesis_thread = threading.Thread(target=nemesis.run, args=(stop_faults,), name="nemesis", daemon=True)
        timings["workload_started"] = history.now()
        nemesis_thread.start()
        interrupted.wait(opts.time_s)
        stop_faults.set()
        nemesis_thread.join()
        if interrupted.is_set():
            raise KeyboardInterrupt
        nemesis.heal_everything()
        timings["healed"] = history.now()
        recovery_started = time.monotonic()
        recovered = _wait_healthy(cluster, opts, RECOVERY_WAIT_S)
        interrupted.wait(max(0.0, opts.recovery_s - (time.monotonic() - recovery_started)))
        workload.stop_producing()
        timings["producers_stopped"] = history.now()
        workload.stop()
        workload.final_read()
        timings["final_read_done"] = history.now()
    finally:
        if workload is not None:
            workload.signal_stop()
        cluster.save_logs()
        cluster.teardown()
        history.close()
        rdkafka_log.removeHandler(client_log)
        client_log.close()
        if not opts.keep_data:
            shutil.rmtree(run_dir / "data", ignore_errors=True)
    result = check(history.ops, opts.idempotent or opts.transactional)
    results = {
        "name": name, "options": {**dataclasses.asdict(opts), "out": str(opts.out), "seed": seed},
        "settings": cluster.settings, "cell": opts.cell(), "result": result, "timings": timings,
        "recovered": recovered, "faults": nemesis.faults if nemesis else 0,
        "refused_connections": cluster.network.refused, "duration_s": round(time.monotonic() - started, 1),
        "run_dir": str(run_dir),
    }
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    write_run_report(run_dir / "report.html", results, history.ops)
    return results


# -- the matrix -----------------------------------------------------------------------------

def expectation(cell: dict) -> str | None:
    """What a cell must show: "loses" (the Jepsen configuration under the Jepsen schedule),
    "safe" (unclean off, min ISR 2, acks=all: under any fault), or None (reported only)."""
    if cell["unclean"] and cell["min_isr"] == 1 and cell["acks"] == "all" and cell["nemesis"] == "jepsen":
        return "loses"
    if not cell["unclean"] and cell["min_isr"] >= 2 and cell["acks"] == "all":
        return "safe"
    return None


def expectation_failures(results: list[dict]) -> list[str]:
    """Every cell whose result contradicts its expectation, as readable lines; and, whatever the
    cell, a cluster that did not come back (every partition led, with a full ISR) after healing."""
    failures = []
    for r in results:
        if not r["recovered"]:
            failures.append(f"{r['name']}: not recovered: {NOT_RECOVERED}")
        expected = expectation(r["cell"])
        lost = r["result"]["counts"][LOST_WRITE]
        complete = r["result"]["stats"]["final_read_complete"]
        if expected == "loses" and lost == 0:
            failures.append(f"{r['name']}: expected lost writes (unclean election of a stale follower), saw none")
        elif expected == "safe" and lost > 0:
            failures.append(f"{r['name']}: {lost} acknowledged writes lost with unclean off, min ISR 2, acks=all")
        elif expected == "safe" and not complete:
            failures.append(f"{r['name']}: inconclusive, the final read did not reach every partition's end")
    return failures


def run_matrix(base: RunOptions, *, unclean=(True, False), min_isr=(1, 2), acks=("1", "all"),
               nemeses=MATRIX_KINDS,
               interrupted: threading.Event | None = None, on_result=None) -> dict:
    """Every combination, one run each, in `<out>/matrix-<time>/`; returns results and failures."""
    matrix_dir = Path(base.out) / (base.name or f"matrix-{time.strftime('%Y%m%dT%H%M%S')}")
    results = []
    for nemesis in nemeses:
        for u in unclean:
            for m in min_isr:
                for a in acks:
                    opts = dataclasses.replace(base, unclean=u, min_isr=m, acks=a, nemesis=nemesis, out=matrix_dir,
                                               name=f"{nemesis}-unclean-{'on' if u else 'off'}-minisr{m}-acks{a}")
                    results.append(run_test(opts, interrupted))
                    if on_result:
                        on_result(results[-1])
    failures = expectation_failures(results)
    summary = {"results": [{k: r[k] for k in ("name", "cell", "faults", "recovered", "duration_s")}
                           | {"counts": r["result"]["counts"], "stats": r["result"]["stats"],
                              "violations": r["result"]["violations"], "expected": expectation(r["cell"])}
                           for r in results],
               "expectation_failures": failures}
    (matrix_dir / "matrix.json").write_text(json.dumps(summary, indent=2))
    write_matrix_report(matrix_dir / "index.html", summary)
    return {"dir": str(matrix_dir), "results": results, "failures": failures}
