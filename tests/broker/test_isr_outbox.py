"""The AlterPartition outbox (IsrOutbox): the sending rules production's isr_sender.py and weir
sim's share."""

from weir.replication.isr_outbox import IsrOutbox
from weir.replication.leader import AlterPartitionProposal

A, B = ("t", 0), ("t", 1)
BACKOFF = 100


def proposal(isr=(1, 2)) -> AlterPartitionProposal:
    return AlterPartitionProposal(1, 3, 5, frozenset(isr), False)


def test_one_request_in_flight_carries_every_due_proposal():
    outbox = IsrOutbox(BACKOFF)
    a, b, a2 = proposal(), proposal(), proposal((1,))
    outbox.submit(A, a, 0)
    outbox.submit(B, b, 0)
    assert outbox.take(0) == {A: a, B: b}
    outbox.submit(A, a2, 1)
    assert outbox.take(1) is None  # waits for the answer
    assert outbox.answered({A, B}, 2) == {A: a, B: b}
    assert outbox.take(2) == {A: a2}


def test_a_newer_proposal_replaces_an_unsent_one():
    outbox = IsrOutbox(BACKOFF)
    outbox.submit(A, proposal(), 0)
    newer = proposal((1,))
    outbox.submit(A, newer, 0)
    assert outbox.take(0) == {A: newer}


def sent_two() -> tuple[IsrOutbox, AlterPartitionProposal, AlterPartitionProposal]:
    """An outbox with proposals for A and B in flight, sent at 0."""
    outbox = IsrOutbox(BACKOFF)
    a, b = proposal(), proposal()
    outbox.submit(A, a, 0)
    outbox.submit(B, b, 0)
    assert outbox.take(0) == {A: a, B: b}
    return outbox, a, b


def test_a_failed_request_is_sent_again_after_the_backoff():
    outbox, a, b = sent_two()
    outbox.failed(10)
    assert outbox.take(10 + BACKOFF - 1) is None and outbox.wake_at() == 10 + BACKOFF
    assert outbox.take(10 + BACKOFF) == {A: a, B: b}


def test_a_failed_proposal_replaced_or_withdrawn_meanwhile_is_not_sent_again():
    outbox, _, _ = sent_two()
    newer = proposal((1,))
    outbox.submit(A, newer, 1)
    outbox.withdraw(B)  # B's partition changed role
    outbox.failed(10)
    assert outbox.take(10) == {A: newer}  # due at once: it was never sent
    outbox.answered({A}, 11)
    assert outbox.wake_at() is None


def test_a_proposal_the_answer_left_out_is_sent_again_after_the_backoff():
    outbox, _, b = sent_two()
    outbox.answered({A}, 10)  # B's topic was unknown to the controller, say
    assert outbox.take(10) is None
    assert outbox.take(10 + BACKOFF) == {B: b}


def test_a_retry_of_the_same_proposal_waits_the_backoff_and_a_new_one_does_not():
    outbox = IsrOutbox(BACKOFF)
    a = proposal()
    outbox.submit(A, a, 0)
    outbox.take(0)
    outbox.answered({A}, 10)
    outbox.submit(A, a, 10)  # the partition's retry after a retriable error: the proposal in flight
    assert outbox.take(10) is None and outbox.wake_at() == 10 + BACKOFF
    fresh = proposal((1,))
    outbox.submit(A, fresh, 20)
    assert outbox.take(20) == {A: fresh}


def test_a_withdrawn_proposal_is_not_sent():
    outbox = IsrOutbox(BACKOFF)
    outbox.submit(A, proposal(), 0)
    outbox.withdraw(A)
    assert outbox.take(0) is None and outbox.wake_at() is None
