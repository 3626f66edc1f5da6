"""`weir up`: ZooKeeper and a local cluster in the foreground, supervised; `weir lab`: the
commands that stop, kill, pause, resume and start one of its brokers while it runs.

`weir up` restarts a broker that dies (supervisor.py says when) and prints what happened to it. It
listens for `weir lab` on a Unix socket in its data directory (`<data-dir>/weir-up.sock`);
commands are carried out one at a time on its main loop, between supervision rounds.

Ctrl-C (or SIGTERM), even while the cluster is starting, stops every broker cleanly (controlled
shutdown; paused ones are resumed first), then ZooKeeper; a broker still running
CLUSTER_STOP_TIMEOUT_S later (wedged, or SIGSTOPped from outside) is SIGKILLed, and so is a
ZooKeeper that outlives its own bound. Ctrl-C again while it stops: `weir up` exits at once. The
brokers and ZooKeeper die with `weir up` however it ends, SIGKILL included (child_process.py).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from weir.lab.local_cluster import CLUSTER_STOP_TIMEOUT_S, LocalCluster
from weir.lab.supervisor import ALIVE, BrokerLife, RestartPolicy

SOCKET_NAME = "weir-up.sock"
TICK_S = 0.2
COMMANDS = ("status", "stop", "kill", "pause", "resume", "start")


def say(text: str) -> None:
    print(f"weir: {text}", flush=True)


class ControlServer(threading.Thread):
    """Accepts one JSON request per connection, hands it to the main loop, writes back its answer."""

    def __init__(self, path: Path, commands: queue.Queue) -> None:
        super().__init__(daemon=True, name="weir-up-control")
        self.path = path
        self.commands = commands
        if path.exists():
            path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    request = json.loads(conn.makefile("r").readline())
                    answers: queue.Queue = queue.Queue(1)
                    self.commands.put((request, answers))
                    answer = answers.get(timeout=120)
                except (ValueError, queue.Empty) as e:
                    answer = {"ok": False, "message": f"bad request: {e}"}
                try:
                    conn.sendall((json.dumps(answer) + "\n").encode())
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        if self.path.exists():
            self.path.unlink()


class Supervisor:
    def __init__(self, cluster: LocalCluster, policy: RestartPolicy) -> None:
        self.policy = policy
        self.brokers = {b.broker_id: b for b in cluster.brokers}
        self.lives = {b.broker_id: BrokerLife(b.broker_id) for b in cluster.brokers}

    def started_all(self, now: float) -> None:
        for life in self.lives.values():
            self.policy.started(life, now)
            life.state = "running"

    def tick(self, now: float) -> None:
        for broker_id, broker in self.brokers.items():
            life = self.lives[broker_id]
            if life.state in ALIVE and broker.proc.poll() is not None:
                say(self.policy.died(life, broker.proc.returncode, now))
            elif life.state == "starting" and broker.ready:
                life.state = "running"
                say(f"broker {broker_id} is up on {broker.bootstrap}")
            elif self.policy.due(life, now):
                say(f"restarting broker {broker_id}")
                self._start(broker_id, now)

    def _start(self, broker_id: int, now: float) -> None:
        self.brokers[broker_id].start(wait=False)
        self.policy.started(self.lives[broker_id], now)

    def handle(self, request: dict, now: float) -> dict:
        op, broker_id = request.get("op"), request.get("broker")
        if op == "status":
            return {"ok": True, "brokers": [self._status(b, now) for b in sorted(self.brokers)]}
        if op not in COMMANDS or broker_id not in self.brokers:
            return {"ok": False, "message": f"unknown command {op!r} or broker {broker_id!r} "
                                            f"(brokers: {sorted(self.brokers)})"}
        broker, life = self.brokers[broker_id], self.lives[broker_id]
        alive = life.state in ALIVE
        if (op == "start" and life.state == "paused") or op == "resume":
            if life.state != "paused":
                return {"ok": False, "message": f"broker {broker_id} is not paused ({life.state})"}
            broker.resume()
            life.state = "running"
            return {"ok": True, "message": f"broker {broker_id} resumed"}
        if op == "start":
            if alive:
                return {"ok": False, "message": f"broker {broker_id} is already {life.state}"}
            self._start(broker_id, now)
            return {"ok": True, "message": f"broker {broker_id} starting"}
        if not alive:
            return {"ok": False, "message": f"broker {broker_id} is {life.state}"}
        if op == "stop":
            if life.state == "paused":
                broker.resume()
            broker.stop()
            self.policy.stopped(life)
            return {"ok": True, "message": f"broker {broker_id} stopped (controlled shutdown); "
                                           f"`weir lab start --broker {broker_id}` brings it back"}
        if op == "kill":
            broker.kill()  # the supervisor sees a death, as with a kill -9 from outside
            return {"ok": True, "message": f"broker {broker_id} killed (SIGKILL)"}
        if life.state == "paused":
            return {"ok": False, "message": f"broker {broker_id} is already paused"}
        broker.pause()
        life.state = "paused"
        return {"ok": True, "message": f"broker {broker_id} paused (SIGSTOP); `weir lab resume` resumes it"}

    def _status(self, broker_id: int, now: float) -> dict:
        broker, life = self.brokers[broker_id], self.lives[broker_id]
        return {"broker": broker_id, "address": broker.bootstrap, "state": life.state,
                "pid": broker.proc.pid if broker.running else None, "deaths": len(life.deaths),
                "restart_in_s": None if life.restart_at is None else round(max(0.0, life.restart_at - now), 1)}

    def resume_paused(self) -> None:
        for broker_id, life in self.lives.items():
            if life.state == "paused":
                self.brokers[broker_id].resume()


def start_console(bootstrap: str, metrics_port: int, port: int, security=None) -> None:
    """The web console, on its own event loop in a thread of `weir up`; prints its URL once it listens."""
    import asyncio

    from weir.console.server import Console, serve
    started = threading.Event()

    def run() -> None:
        console = Console(bootstrap, metrics_port, {}, security)
        try:
            asyncio.run(serve(console, "127.0.0.1", port, lambda url: (say(f"console on {url}"), started.set())))
        except OSError as e:  # a taken port costs the console, not the cluster
            say(f"no console: port {port}: {e}")
            started.set()
    threading.Thread(target=run, daemon=True, name="weir-up-console").start()
    started.wait(10)


def run_up(args) -> int:
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    from weir.lab.local_cluster import SecureSetup
    secure = SecureSetup(data_dir) if args.secure else None
    cluster = LocalCluster(data_dir, args.brokers, base_port=args.port, zookeeper_port=args.zookeeper_port,
                           overrides=dict(o.split("=", 1) for o in args.override), echo=True,
                           log_level=args.log_level.upper(), secure=secure)
    for broker in cluster.brokers:
        broker.overrides.setdefault("metrics.port", str(args.metrics_port + broker.broker_id))
    supervisor = Supervisor(cluster, RestartPolicy(restart=not args.no_restart,
                                                   first_backoff_s=args.restart_backoff_ms / 1000))
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    commands: queue.Queue = queue.Queue()
    control = None
    try:
        cluster.start()
        supervisor.started_all(time.monotonic())
        control = ControlServer(data_dir / SOCKET_NAME, commands)
        control.start()
        if secure is not None:  # before "weir is up": whoever waits for that line has the password too
            say(f"secured: SASL_SSL with SCRAM-SHA-512 (and -256), ACLs on (admin is a super user; `weir acls` "
                f"grants the others); CA certificate {secure.ca_path}; client properties in "
                f"{write_client_properties(secure)}")
            print(f"admin password: {secure.admin_password}", flush=True)
        print(f"weir is up: bootstrap {cluster.bootstrap}, ZooKeeper {cluster.zookeeper_connect}. Ctrl-C stops it.",
              flush=True)
        for broker in cluster.brokers:
            say(f"broker {broker.broker_id} on {broker.bootstrap}, metrics "
                f"http://127.0.0.1:{broker.overrides['metrics.port']}/metrics")
        if args.console_port >= 0:
            start_console(cluster.bootstrap, args.metrics_port, args.console_port,
                          secure.client_security() if secure else None)
        say(f"`weir lab status|stop|kill|pause|resume|start --broker N --data-dir {args.data_dir}` acts on one")
        while True:
            try:
                request, answers = commands.get(timeout=TICK_S)
                answers.put(supervisor.handle(request, time.monotonic()))
            except queue.Empty:
                pass
            supervisor.tick(time.monotonic())
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # the children die with us (child_process.py)
            signal.signal(sig, lambda *_: os._exit(130))
        say(f"shutting down (brokers still running in {CLUSTER_STOP_TIMEOUT_S} s are killed; Ctrl-C again: now)")
        if control is not None:
            control.close()
        supervisor.resume_paused()
        cluster.stop()
    return 0


def _interrupt(*_) -> None:
    """Ctrl-C or SIGTERM: whatever the main thread waits for (a broker starting, the next
    supervision round) is given up, and the cluster stopped."""
    raise KeyboardInterrupt


def write_client_properties(secure) -> Path:
    """`<data-dir>/tls/admin.properties`: Kafka client properties for the admin user (for
    `--command-config` of weir's and Kafka's tools)."""
    path = secure.ca_path.parent / "admin.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{secure.admin_password}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={secure.ca_path.resolve()}\n")
    path.chmod(0o600)
    return path


def run_lab_command(args) -> int:
    path = Path(args.data_dir) / SOCKET_NAME
    if args.op != "status" and args.broker is None:
        print("weir lab: --broker is required", file=sys.stderr)
        return 2
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(150)
            sock.connect(str(path))
            sock.sendall((json.dumps({"op": args.op, "broker": args.broker}) + "\n").encode())
            answer = json.loads(sock.makefile("r").readline())
    except (OSError, ValueError) as e:
        print(f"weir lab: no `weir up` answers at {path} ({e})", file=sys.stderr)
        return 1
    if "brokers" in answer:
        print(f"{'BROKER':<8}{'ADDRESS':<18}{'STATE':<10}{'PID':<9}{'DEATHS':<8}RESTART IN")
        for b in answer["brokers"]:
            restart = "" if b["restart_in_s"] is None else f"{b['restart_in_s']} s"
            print(f"{b['broker']:<8}{b['address']:<18}{b['state']:<10}{b['pid'] or '-'!s:<9}{b['deaths']:<8}{restart}")
    else:
        print(answer["message"], file=sys.stdout if answer["ok"] else sys.stderr)
    return 0 if answer["ok"] else 1


def register(sub) -> None:
    up = sub.add_parser("up", help="run ZooKeeper and a 3-broker cluster on 127.0.0.1 (bootstrap 9092), supervised")
    up.add_argument("--data-dir", default="data", help="ZooKeeper's and the brokers' data, and the control socket")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers (ids 0, 1, ...)")
    up.add_argument("--port", type=int, default=9092, help="the first broker's port; the others follow")
    up.add_argument("--zookeeper-port", type=int, default=2181, help="ZooKeeper's client port")
    up.add_argument("--metrics-port", type=int, default=9404, help="broker 0's Prometheus port; the others follow")
    up.add_argument("--console-port", type=int, default=8080, help="the web console's port (-1: no console)")
    up.add_argument("--no-restart", action="store_true", help="leave a broker that dies down")
    up.add_argument("--secure", action="store_true",
                    help="SASL_SSL listeners (SCRAM), a CA and broker certificates under <data-dir>/tls/, "
                         "ACLs on, and a super user `admin` whose password is printed")
    up.add_argument("--restart-backoff-ms", type=int, default=1000, help="first restart delay (doubles on repeats)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for every broker (repeatable), e.g. min.insync.replicas=2")
    up.add_argument("--log-level", default=argparse.SUPPRESS,
                    help="INFO (default: leader, ISR and election changes, fencing, truncation) or DEBUG; "
                         "also `weir --log-level`")
    up.set_defaults(func=run_up)
    lab = sub.add_parser("lab", help="stop, kill, pause, resume or start one broker of a running `weir up`")
    lab.add_argument("op", choices=COMMANDS)
    lab.add_argument("--broker", type=int, default=None)
    lab.add_argument("--data-dir", default="data", help="the data directory `weir up` runs in")
    lab.set_defaults(func=run_lab_command)
