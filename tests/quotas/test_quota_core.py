"""The pure quota core: Kafka's Rate, KIP-55's resolution, AlterClientQuotas' validation and
DescribeClientQuotas' filter, the ZooKeeper paths and change notices."""

import pytest

from weir.protocol.errors import ErrorCode
from weir.quotas.client_quotas import INACTIVE_MS, ClientQuotas, QuotaBook
from weir.quotas.describe import DEFAULT, EXACT, SPECIFIED, checked_filter, described
from weir.quotas.entities import (QuotaError, alter, checked_entity, encode_notice, entity, entity_of_path, entity_path,
                                  notice_entity)
from weir.quotas.rate import Rate, TokenBucket


def test_a_new_rate_is_measured_over_samples_minus_one_windows_as_kafkas():
    rate = Rate(11, 1000)
    rate.record(10_000, 0)
    assert rate.span_ms(0) == 10_000 and rate.measure(0) == 1000  # 10 kB over ten seconds
    assert rate.measure(500) == pytest.approx(10_000 / 10.5)
    assert rate.span_ms(12_000) == 10_000  # all samples expired: measured afresh
    assert rate.measure(12_000) == 0


def test_the_rate_spans_the_retained_samples_once_they_are_many():
    rate = Rate(3, 1000)
    for t in range(0, 5000, 100):
        rate.record(100, t)
    # samples at 2000, 3000, 4000 (each of ten records), measured at 4900: 2.9 s
    assert rate.span_ms(4900) == 2900
    assert rate.measure(4900) == pytest.approx(3000 / 2.9)


def test_the_throttle_time_brings_the_rate_back_to_the_bound():
    rate = Rate(11, 1000)
    rate.record(20_000, 0)  # 2000/s over ten seconds against a bound of 1000/s
    assert rate.throttle_ms(1000, 0) == 10_000
    assert rate.throttle_ms(2000, 0) == 0


def book_with(**quotas) -> QuotaBook:
    book = QuotaBook()
    for path, value in quotas.items():
        book.set(entity_of_path(path.replace("__", "/").replace("DEFAULT", "<default>")),
                 {"producer_byte_rate": str(value)})
    return book


def test_the_most_specific_entity_wins_and_names_the_shared_rate():
    book = book_with(users__alice=100, clients__c1=200, clients__DEFAULT=300, users__DEFAULT__clients__c1=400)
    assert book.resolve("producer_byte_rate", "alice", "c1") == (("alice", ""), 100)
    assert book.resolve("producer_byte_rate", "bob", "c1") == (("bob", "c1"), 400)
    assert book.resolve("producer_byte_rate", "bob", "c2") == (("", "c2"), 300)
    assert book.resolve("consumer_byte_rate", "bob", "c2") == (("", "c2"), None)
    book.set(entity(user="alice", client_id=None), {"producer_byte_rate": "50"})
    assert book.resolve("producer_byte_rate", "alice", "c1") == (("alice", "c1"), 50)


def test_a_client_over_its_quota_is_throttled_and_another_is_not():
    book = book_with(clients__c1=1000)
    quotas = ClientQuotas(book, "producer_byte_rate", 11, 1000)
    quotas.quotas_changed()
    assert quotas.record("ANONYMOUS", "c1", 10_000, 0) == 0  # the first ten seconds' allowance
    assert quotas.record("ANONYMOUS", "c1", 1_000, 0) == 1000
    assert quotas.record("ANONYMOUS", "c2", 1_000_000, 0) == 0
    quotas.unrecord("ANONYMOUS", "c1", 1_000, 0)
    assert quotas.record("ANONYMOUS", "c1", 0, 0) == 0
    assert quotas.max_value_in_window("ANONYMOUS", "c1") == 10_000
    quotas.throttled("ANONYMOUS", "c1", 1000, 0)
    by_tags = {tags: (rate, throttle) for tags, rate, throttle in quotas.metrics(0)}
    assert by_tags[("", "c1")] == (1000, 1000) and by_tags[("", "c2")][1] == 0


def test_nothing_is_recorded_without_quotas_and_idle_rates_are_dropped():
    book = QuotaBook()
    quotas = ClientQuotas(book, "producer_byte_rate", 11, 1000, max_throttle_ms=1000)
    quotas.quotas_changed()
    assert quotas.record("u", "c", 10 ** 9, 0) == 0 and quotas.metrics(0) == []
    book.set(entity(user="u"), {"producer_byte_rate": "1", "SCRAM-SHA-256": "salt=..."})
    quotas.quotas_changed()
    assert quotas.record("u", "c", 10 ** 9, 0) == 1000  # bounded
    quotas.record("v", "c", 1, INACTIVE_MS + 1)
    assert [tags for tags, _, _ in quotas.metrics(INACTIVE_MS + 1)] == [("", "c")]


@pytest.mark.parametrize("pairs, message", [
    ([], "Invalid empty client quota entity"),
    ([("user", "")], "Empty user not supported"),
    ([("client-id", "")], "Empty client-id not supported"),
    ([("", "name")], "Unhandled client quota entity type: "),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([("user", "u"), ("ip", "1.2.3.4")], "Invalid quota entity combination"),
    ([("ip", "not a valid host because it has spaces")], "is not a valid IP or resolvable host."),
])
def test_bad_entities_are_invalid_requests(pairs, message):
    with pytest.raises(QuotaError) as e:
        checked_entity(pairs)
    assert e.value.code == ErrorCode.invalid_request and message in e.value.message


@pytest.mark.parametrize("key, value, message", [
    ("bad", 1.0, "Invalid configuration key bad"),
    ("producer_byte_rate", 10000.5, "Configuration producer_byte_rate must be a LONG value"),
    ("producer_byte_rate", -5.0, "Quota producer_byte_rate must be greater than 0"),
    ("request_percentage", 0.0, "Quota request_percentage must be greater than 0"),
    ("connection_creation_rate", 1.0, "Invalid configuration key connection_creation_rate"),
    ("SCRAM-SHA-256", 1.0, "Invalid configuration key SCRAM-SHA-256"),
])
def test_bad_values_are_invalid_requests(key, value, message):
    with pytest.raises(QuotaError) as e:
        alter(entity(user="u"), {}, [(key, value, False)])
    assert e.value.code == ErrorCode.invalid_request and e.value.message == message


def test_alter_keeps_the_credentials_beside_the_quotas():
    stored = {"SCRAM-SHA-256": "salt=x", "consumer_byte_rate": "5"}
    out = alter(entity(user="u"), stored, [("producer_byte_rate", 1048576.0, False), ("request_percentage", 12.5, False),
                                           ("consumer_byte_rate", 0, True), ("nothing", 0, True)])
    assert out == {"SCRAM-SHA-256": "salt=x", "producer_byte_rate": "1048576", "request_percentage": "12.5"}
    assert alter(entity(ip=None), {}, [("connection_creation_rate", 50.0, False)]) == {"connection_creation_rate": "50"}


def test_paths_and_notices_are_kafkas():
    e = entity(user="user with spaces", client_id=None)
    assert entity_path(e) == "users/user%20with%20spaces/clients/<default>"
    assert entity_of_path(entity_path(e)) == e
    assert entity_path(entity(client_id="<default>")) == "clients/%3Cdefault%3E"
    assert entity_of_path("clients/%3Cdefault%3E") == entity(client_id="<default>")
    assert entity_path(entity(ip="::1")) == "ips/%3A%3A1"
    assert encode_notice(entity(user="alice")) == b'{"version":2,"entity_path":"users/alice"}'
    assert notice_entity(b'{"version":1,"entity_type":"clients","entity_name":"c1"}') == entity(client_id="c1")
    assert notice_entity(b'{"version":2,"entity_path":"topics/t"}') is None
    with pytest.raises(ValueError):
        notice_entity(b'{"version":7}')


CONFIGS = {
    entity(user="u1", client_id="c1"): {"producer_byte_rate": "1"},
    entity(user="u1"): {"producer_byte_rate": "2", "SCRAM-SHA-256": "x"},
    entity(user=None): {"producer_byte_rate": "3"},
    entity(client_id="c1"): {"producer_byte_rate": "4"},
    entity(user="scram-only"): {"SCRAM-SHA-256": "x"},
    entity(ip="1.2.3.4"): {"connection_creation_rate": "5"},
}


def names(result):
    return [dict(e) for e, _ in result]


def test_describe_filters_as_kafka():
    assert len(described(CONFIGS, checked_filter([]), strict=False)) == 5
    assert described(CONFIGS, checked_filter([]), strict=True) == []
    assert names(described(CONFIGS, checked_filter([("user", EXACT, "u1")]), strict=True)) == [{"user": "u1"}]
    assert names(described(CONFIGS, checked_filter([("user", EXACT, "u1")]), strict=False)) == [
        {"client-id": "c1", "user": "u1"}, {"user": "u1"}]
    assert names(described(CONFIGS, checked_filter([("user", DEFAULT, None)]), strict=True)) == [{"user": None}]
    assert names(described(CONFIGS, checked_filter([("user", SPECIFIED, None)]), strict=True)) == [
        {"user": None}, {"user": "u1"}]
    assert names(described(CONFIGS, checked_filter([("ip", SPECIFIED, None)]), strict=False)) == [{"ip": "1.2.3.4"}]
    assert described(CONFIGS, checked_filter([("user", EXACT, "u1")]), strict=True)[0][1] == {
        "producer_byte_rate": 2.0}


@pytest.mark.parametrize("components, code", [
    ([("user", 0, "a"), ("user", 1, None)], ErrorCode.invalid_request),
    ([("", 1, None)], ErrorCode.invalid_request),
    ([("other", 0, "name")], ErrorCode.unsupported_version),
    ([("ip", 2, None), ("user", 2, None)], ErrorCode.invalid_request),
    ([("user", 7, None)], ErrorCode.unknown_server_error),
])
def test_bad_filters_get_kafkas_errors(components, code):
    with pytest.raises(QuotaError) as e:
        checked_filter(components)
    assert e.value.code == code


def test_a_token_bucket_lets_one_mutation_overdraw_it_then_refills_at_the_quota():
    book = QuotaBook()
    book.set(entity(user=None), {"controller_mutation_rate": "2"})
    quotas = ClientQuotas(book, "controller_mutation_rate", 11, 1000, stat=TokenBucket)
    quotas.quotas_changed()
    assert quotas.throttle_now("u", "c", 0) == 0
    assert quotas.record("u", "c", 20, 0) == 0  # 22 tokens: 11 windows of 2/s
    assert quotas.record("u", "c", 6, 0) == 2000  # 4 below zero: two seconds at 2/s
    assert quotas.throttle_now("u", "c", 1000) == 1000
    assert quotas.throttle_now("u", "c", 2000) == 0
    assert quotas.throttle_now("other", "c", 0) == 0  # the default user's quota: a bucket per user
