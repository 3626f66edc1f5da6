"""Client quotas as a Java user meets them (kafka-clients 3.9.1): a 1 MiB/s producer_byte_rate and
consumer_byte_rate for one client id, set and described by the Java admin client, hold its
producer and its consumer to about 1 MiB/s, both seeing a throttle time; another client id
beside it goes at full speed. And the same quotas set by `weir configs`, read back by the Java
admin client (confluent-kafka, kafka-python and aiokafka have no client-quota admin calls).

The broker measures rates over quota.window.num=2 windows of a second: Kafka's default of 11
measures a new client over ten seconds from its first byte, which lets it burst ten seconds'
worth before any throttling, and the test would take half a minute to see a rate. With two
windows a client may burst one second's worth, so 4 MiB at 1 MiB/s take about 3 s.
"""

from java_client import quota_clients

from weir.cli.main import main

MiB = 1 << 20
BYTES = 4 * MiB
BURST_S = 1  # what a fresh client may send at once: (quota.window.num - 1) windows


def held_to_about_1_mib_s(result: dict) -> bool:
    elapsed_s = result["elapsed_ms"] / 1000
    return (BYTES / MiB - BURST_S) * 0.7 <= elapsed_s <= (BYTES / MiB) * 2.5


def test_a_client_ids_byte_rates_hold_its_producer_and_consumer_but_not_another(start_broker):
    broker = start_broker(quota_window_num="2")
    limits = [f"producer_byte_rate={MiB}", f"consumer_byte_rate={MiB}"]
    lines = quota_clients(
        broker.bootstrap, ["alter", "slow", *limits], ["describe"], ["topic", "t"], ["topic", "p"],
        ["produce", "t", "fast", str(BYTES)],
        # the held client produces and consumes at once (a few seconds, not twice that); then the other
        ["bg", "produce", "p", "slow", str(BYTES)], ["consume", "t", "slow", str(BYTES)], ["join"],
        ["consume", "t", "fast", str(BYTES)], ["produce", "p", "fast", str(BYTES)])
    described = next(line for line in lines if "quotas" in line)
    assert described["quotas"] == [{"entity": {"client-id": "slow"},
                                    "values": {"producer_byte_rate": float(MiB), "consumer_byte_rate": float(MiB)}}]
    # (kind, client id) → its run; the fast producer's second, once the JVM is warm
    runs = {("produced" if "produced" in line else "consumed", line["client"]): line for line in lines
            if "client" in line}
    slow_produce, slow_consume = runs[("produced", "slow")], runs[("consumed", "slow")]
    assert held_to_about_1_mib_s(slow_produce) and slow_produce["throttle_ms"] > 0, slow_produce
    assert slow_consume["consumed"] >= BYTES
    assert held_to_about_1_mib_s(slow_consume) and slow_consume["throttle_ms"] > 0, slow_consume
    for kind in ("produced", "consumed"):  # the other client id beside it: not held
        fast, slow = runs[(kind, "fast")], runs[(kind, "slow")]
        assert fast["throttle_ms"] == 0 and fast["elapsed_ms"] * 2 < slow["elapsed_ms"], (fast, slow)


def weir_configs(capsys, bootstrap: str, *args: str, fails: bool = False) -> str:
    """`weir configs --bootstrap-server B <args>`, in this process (each start of the CLI costs a
    second or two); its output (its errors if `fails`)."""
    code = main(["configs", "--bootstrap-server", bootstrap, *args])
    out = capsys.readouterr()
    assert (code != 0) == fails, out
    return out.err if fails else out.out


def test_quotas_set_by_weir_configs_are_read_back_by_the_java_admin_client(broker, capsys):
    weir_configs(capsys, broker.bootstrap, "--entity-type", "clients", "--entity-name", "slow", "--alter", "--add-config",
                 f"producer_byte_rate={MiB},consumer_byte_rate={MiB}")
    weir_configs(capsys, broker.bootstrap, "--entity-type", "users", "--entity-default", "--alter", "--add-config",
                 "request_percentage=50")
    [described] = quota_clients(broker.bootstrap, ["describe"])
    assert sorted(described["quotas"], key=str) == sorted([
        {"entity": {"client-id": "slow"}, "values": {"producer_byte_rate": float(MiB), "consumer_byte_rate": float(MiB)}},
        {"entity": {"user": None}, "values": {"request_percentage": 50.0}}], key=str)
    assert weir_configs(capsys, broker.bootstrap, "--entity-type", "clients", "--entity-name", "slow", "--describe") == (
        f"Quota configs for client-id 'slow' are consumer_byte_rate={MiB}.0, producer_byte_rate={MiB}.0\n")
    alice_default = ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default"]
    assert weir_configs(capsys, broker.bootstrap, *alice_default, "--alter", "--add-config", "producer_byte_rate=1e7") == (
        "Completed updating config for user alice.\n")
    assert weir_configs(capsys, broker.bootstrap, *alice_default, "--describe") == (
        "Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1.0E7\n")
    weir_configs(capsys, broker.bootstrap, *alice_default, "--alter", "--delete-config", "producer_byte_rate")
    assert weir_configs(capsys, broker.bootstrap, *alice_default, "--describe") == ""
    assert "Invalid config(s): consumer_byte_rate" in weir_configs(
        capsys, broker.bootstrap, *alice_default, "--alter", "--delete-config", "consumer_byte_rate", fails=True)
