"""`weir up --secure` as a user runs it: SASL_SSL on the usual ports, the CA under
<data-dir>/tls/ca.pem, the admin password printed on its own line; `weir users` adds a user with
the admin's client properties and `weir acls --producer` lets it write; it produces, admin
consumes; a wrong password is refused. ZooKeeper's znodes are the brokers' (`zookeeper.set.acl`):
`weir users --zookeeper` writes them only with the brokers' login (`tls/zookeeper.properties`)."""

import re
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer

sys.path.insert(0, str(Path(__file__).parents[1] / "ops"))
from lab import Up  # noqa: E402


def test_weir_up_secure(tmp_path):
    up = Up(tmp_path / "data", "--secure")
    try:
        password = next(m.group(1) for line in up.lines if (m := re.fullmatch(r"admin password: (\S+)\n", line)))
        ca = tmp_path / "data" / "tls" / "ca.pem"
        properties = tmp_path / "data" / "tls" / "admin.properties"
        assert ca.exists() and properties.exists()
        done = subprocess.run([sys.executable, "-m", "weir.cli.main", "users", "--bootstrap-server", up.bootstrap,
                               "--command-config", str(properties), "--alter", "--entity-name", "alice",
                               "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        described = subprocess.run([sys.executable, "-m", "weir.cli.main", "users", "--bootstrap-server", up.bootstrap,
                                    "--command-config", str(properties), "--describe"],
                                   capture_output=True, text=True, timeout=60)
        assert "user-principal 'alice' are SCRAM-SHA-512-iterations=8192" in described.stdout
        assert "user-principal 'admin'" in described.stdout
        zookeeper = next(m.group(1) for line in up.lines if (m := re.search(r"ZooKeeper (\S+)\. Ctrl-C", line)))
        assert zookeeper.endswith("/weir")
        in_zookeeper = [sys.executable, "-m", "weir.cli.main", "users", "--zookeeper", zookeeper, "--alter",
                        "--entity-name", "bob", "--add-config", "SCRAM-SHA-512=[password=bob-secret]"]
        refused = subprocess.run(in_zookeeper, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1 and "zookeeper.set.acl" in refused.stderr, refused.stderr
        written = subprocess.run(in_zookeeper + ["--zk-config-file", str(tmp_path / "data" / "tls" / "zookeeper.properties")],
                                 capture_output=True, text=True, timeout=60)
        assert written.returncode == 0, written.stderr
        granted = subprocess.run([sys.executable, "-m", "weir.cli.main", "acls", "--bootstrap-server", up.bootstrap,
                                  "--command-config", str(properties), "--add", "--allow-principal", "User:alice",
                                  "--producer", "--topic", "secure-up"], capture_output=True, text=True, timeout=60)
        assert granted.returncode == 0, granted.stderr  # ACLs are on: alice may write only where granted

        def config(user, secret):
            return {"bootstrap.servers": up.bootstrap, "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": secret,
                    "ssl.ca.location": str(ca)}

        producer = Producer({**config("alice", "alice-secret"), "acks": "all"})
        for i in range(50):
            producer.produce("secure-up", str(i).encode())
        assert producer.flush(30) == 0
        consumer = Consumer({**config("admin", password), "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secure-up"])
        got, deadline = [], time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(int(message.value()))
        consumer.close()
        assert sorted(got) == list(range(50))
        # the console reads the cluster as admin over SASL_SSL
        import json
        import urllib.request

        from waiting import wait_until

        def console_brokers() -> int:
            with urllib.request.urlopen(f"http://127.0.0.1:{up.console_port}/api/state", timeout=5) as response:
                return len(json.loads(response.read())["brokers"])
        wait_until(lambda: console_brokers() == 3, "the console to see three brokers", 30)
        errors = []
        refused = Producer({**config("alice", "not-it"), "error_cb": errors.append})
        refused.poll(3)
        del refused
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    finally:
        assert up.stop() == 0
