"""Processes as /proc shows them: whose children they are, and whether they are gone."""

from pathlib import Path

from waiting import wait_until


def children_of(pid: int) -> list[int]:
    """The children of every thread of process `pid`."""
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")


def gone(pid: int) -> bool:
    """Ended: no process, or a zombie left for its new parent to reap."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_until_gone(pids: list[int], what: str, timeout_s: float = 30) -> None:
    wait_until(lambda: all(gone(pid) for pid in pids), f"{what} to be gone ({pids})", timeout_s, poll_s=0.05)
