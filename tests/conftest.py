import pytest

from broker_process import BrokerProcess


@pytest.fixture
def broker(tmp_path):
    """A fresh broker process; tests may stop/kill and start it again."""
    process = BrokerProcess(tmp_path / "logs").start()
    yield process
    process.kill()
    print(process.output())  # shown by pytest when the test fails
