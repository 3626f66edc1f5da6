"""Kafka's ZkNodeChangeNotificationListener: a store whose every broker must see a change at once
(ACLs, client quotas) writes its znode, then a sequential notice in a notice folder; every
broker watches the folders and applies the notices it has not seen, in order.

At start, and after a new ZooKeeper connection (watches may have been lost meanwhile), the store
reads everything again (`load_all`), the notices listed first, so that a change made during the
read is in a later notice. A notice that cannot be understood (not ours, damaged) is logged and
skipped, as Kafka's listener does: the next ones still apply. Notices older than CHANGE_EXPIRY_S
are deleted by the brokers that saw them (Kafka: 15 minutes), so they do not pile up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kazoo.client import KazooState
from kazoo.exceptions import KazooException, NoNodeError, NotEmptyError

log = logging.getLogger(__name__)

CHANGE_EXPIRY_S = 15 * 60


async def children(session, path: str, watch=None) -> list[str]:
    """The children of `path`, none if it does not exist."""
    try:
        return await session.wait(session.client.get_children_async(path, watch=watch))
    except NoNodeError:
        return []


class ChangeNotices:
    """Over a weir.coordination.zk_client.ZkSession: `load_all()` reads the whole store;
    `apply(folder, data)` applies one notice of `folder` (any exception but a KazooException
    skips it)."""

    def __init__(self, session, folders: list[str], prefix: str, load_all: Callable[[], Awaitable[None]],
                 apply: Callable[[str, bytes], Awaitable[None]], what: str) -> None:
        self.session = session
        self.client = session.client
        self.folders = folders
        self.prefix = prefix
        self.load_all = load_all
        self.apply = apply
        self.what = what  # for the log: "ACL", "client quota"
        self._seen: dict[str, int] = {}  # notice folder → the last sequence number applied
        self._notice_times: dict[str, int] = {}  # path of a notice seen → when it was written (ms)
        self._full = True
        self._wake = asyncio.Event()
        self._watch = session.on_loop(lambda event: self._wake.set())
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        for path in self.folders:
            await self.session.wait(self.client.ensure_path_async(path))
        await self._load_all()
        self._full = False
        self.session.add_state_listener(self._on_state)
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self.session.remove_state_listener(self._on_state)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:  # watches may have been lost: read everything again
            self._full = True
            self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                if self._full:
                    self._full = False
                    await self._load_all()
                else:
                    await self._catch_up()
            except KazooException as e:
                log.warning("cannot read the %ss from ZooKeeper (%r); trying again", self.what, e)
                self._full = True
                await asyncio.sleep(1)
                self._wake.set()
            except Exception:  # the loop must outlive anything: later changes still apply
                log.exception("cannot apply the %s changes", self.what)

    async def _notices(self) -> dict[str, list[tuple[int, str]]]:
        """Per notice folder, its notices in order (watched for new ones)."""
        out = {}
        prefix = self.prefix
        for root in self.folders:
            names = await children(self.session, root, self._watch)
            out[root] = sorted((int(n[len(prefix):]), n) for n in names
                               if n.startswith(prefix) and n[len(prefix):].isdigit())
        return out

    async def _load_all(self) -> None:
        notices = await self._notices()  # first: a change made while we read is in a later notice
        await self.load_all()
        for root, items in notices.items():
            self._seen[root] = items[-1][0] if items else -1
            for _, name in items:
                stat = await self.session.wait(self.client.exists_async(f"{root}/{name}"))
                if stat is not None:
                    self._notice_times[f"{root}/{name}"] = stat.ctime
        await self._purge()

    async def _catch_up(self) -> None:
        for root, items in (await self._notices()).items():
            for sequence, name in items:
                if sequence > self._seen.get(root, -1):
                    await self._process(root, f"{root}/{name}")
                    self._seen[root] = sequence
        await self._purge()

    async def _process(self, root: str, path: str) -> None:
        """Apply one notice; one that cannot be understood is logged and skipped (ZooKeeper errors
        are not: everything is read again)."""
        try:
            data, stat = await self.session.wait(self.client.get_async(path))
        except NoNodeError:  # purged already: its change was long applied
            return
        self._notice_times[path] = stat.ctime
        try:
            await self.apply(root, data)
        except KazooException:
            raise
        except Exception:
            log.exception("cannot apply the %s change notice %s (%r); skipped", self.what, path, data)

    async def _purge(self) -> None:
        """Delete the notices seen that are older than CHANGE_EXPIRY_S (another broker may have)."""
        expired = time.time() * 1000 - CHANGE_EXPIRY_S * 1000
        for path in [p for p, written in self._notice_times.items() if written < expired]:
            del self._notice_times[path]
            try:
                await self.session.wait(self.client.delete_async(path))
            except (NoNodeError, NotEmptyError):
                continue
