"""`weir sim` prints seeds/s, the shrunk trace of a failure and the command to replay it."""

from weir.cli.main import main


def test_failing_seed_prints_shrunk_trace_and_replay(capsys):
    assert main(["sim", "--seeds", "3", "--jobs", "1", "--mutant", "hw-max"]) == 1
    out = capsys.readouterr().out
    assert "seeds/s" in out
    assert "shortest schedule" in out and "VIOLATION" in out
    assert "replay: weir sim --seed 0 --trace --mutant hw-max" in out


def test_one_seed_with_trace(capsys):
    assert main(["sim", "--seed", "1", "--trace"]) == 0
    out = capsys.readouterr().out
    assert "schedule:" in out and "seed 1: ok" in out
