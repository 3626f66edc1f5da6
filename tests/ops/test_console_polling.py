"""The console costs an idle cluster little: it polls slowly while no page looks, and at once when
one comes back."""

import asyncio

from weir.console import server
from weir.console.server import IDLE_POLL_S, POLL_S, Console


class CountingConsole(Console):
    def __init__(self) -> None:
        super().__init__("127.0.0.1:1", None, {})
        self.polls = asyncio.Queue()

    async def poll(self) -> None:
        self.polls.put_nowait(asyncio.get_running_loop().time())


def test_a_page_asking_after_idle_gets_a_fresh_poll_at_once_then_polls_every_poll_s():
    async def run():
        console = CountingConsole()
        task = asyncio.create_task(console.poll_forever())
        try:
            await asyncio.wait_for(console.polls.get(), 5)  # the first picture, unviewed
            assert console._poll_interval_s() == IDLE_POLL_S
            asked = asyncio.get_running_loop().time()
            console.viewed()
            polled = await asyncio.wait_for(console.polls.get(), IDLE_POLL_S / 2)
            assert polled - asked < IDLE_POLL_S / 2
            assert console._poll_interval_s() == POLL_S
            await asyncio.wait_for(console.polls.get(), POLL_S * 4)
        finally:
            task.cancel()
    asyncio.run(run())


def test_a_page_no_longer_asking_leaves_the_console_polling_idly(monkeypatch):
    console = Console("127.0.0.1:1", None, {})
    now = [1000.0]
    monkeypatch.setattr(server.time, "monotonic", lambda: now[0])
    console.viewed()
    assert console._poll_interval_s() == POLL_S
    now[0] += server.VIEWED_S + 0.1
    assert console._poll_interval_s() == IDLE_POLL_S
