from kio.schema.errors import ErrorCode

from weir.replication import NO_EPOCH_CHECK, check_current_leader_epoch, check_leader_request


def test_older_current_leader_epoch_is_fenced():
    assert check_current_leader_epoch(4, 5) is ErrorCode.fenced_leader_epoch


def test_newer_current_leader_epoch_is_unknown():
    assert check_current_leader_epoch(6, 5) is ErrorCode.unknown_leader_epoch


def test_matching_current_leader_epoch_passes():
    assert check_current_leader_epoch(5, 5) is ErrorCode.none


def test_no_current_leader_epoch_means_no_check():
    assert check_current_leader_epoch(NO_EPOCH_CHECK, 5) is ErrorCode.none


def test_epoch_is_checked_before_leadership():
    assert check_leader_request(4, 5, is_leader=False) is ErrorCode.fenced_leader_epoch
    assert check_leader_request(6, 5, is_leader=False) is ErrorCode.unknown_leader_epoch
    assert check_leader_request(5, 5, is_leader=False) is ErrorCode.not_leader_or_follower
    assert check_leader_request(-1, 5, is_leader=False) is ErrorCode.not_leader_or_follower
    assert check_leader_request(5, 5, is_leader=True) is ErrorCode.none
