import pytest

from weir.log import LogConfig, PartitionLog

NOW = 1_000_000


@pytest.fixture
def log_dir(tmp_path):
    return tmp_path / "orders-0"


@pytest.fixture
def open_log(log_dir):
    """Open (or reopen) the partition log at log_dir; closes whatever is still open at the end."""
    opened = []

    def _open(config=LogConfig(), now_ms=NOW, **kwargs):
        log = PartitionLog.open(log_dir, config, now_ms, **kwargs)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log._closed:
            log.close()
