"""ACLs in ZooKeeper (weir.security.acls's layout, Kafka's), kept current on every broker.

A broker reads every ACL znode at start and after a new session. A change (CreateAcls, DeleteAcls,
on any broker) compare-and-sets the pattern's znode and then writes a sequential change notice;
every broker watches the two notice folders and re-reads the patterns named by notices it has not
seen, so a change counts cluster-wide within a ZooKeeper round trip, without a restart. A notice
that cannot be read (not ours, damaged) is logged and skipped, as Kafka's
ZkNodeChangeNotificationListener does: the next ones still apply. Notices older than
CHANGE_EXPIRY_S are deleted by the brokers that saw them (Kafka: 15 minutes).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError

from weir.security.acls import (CHANGE_PREFIX, EXTENDED_CHANGES, LITERAL_CHANGES, LITERAL_ROOT, PREFIXED_ROOT, ZK_TYPES,
                                AclEntry, ResourcePattern, change_notice, decode_entries, encode_entries,
                                pattern_of_notice, pattern_of_path, znode_path)
from weir.security.authorization import RequestAuthorizer

log = logging.getLogger(__name__)

CHANGE_EXPIRY_S = 15 * 60
MAX_TRIES = 20


class AclStore:
    """Over a weir.coordination.zk_client.ZkSession; feeds `authz`'s Authorizer."""

    def __init__(self, session, authz: RequestAuthorizer) -> None:
        self.session = session
        self.client = session.client
        self.authz = authz
        self._seen: dict[str, int] = {}  # notice folder → the last sequence number applied
        self._notice_times: dict[str, int] = {}  # path of a notice seen → when it was written (ms)
        self._full = True
        self._wake = asyncio.Event()
        self._watch = session.on_loop(lambda event: self._wake.set())
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        folders = [f"{root}/{type_name}" for root in (LITERAL_ROOT, PREFIXED_ROOT) for type_name in ZK_TYPES]
        for path in folders + [LITERAL_CHANGES, EXTENDED_CHANGES]:  # Kafka's createAclPaths
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
                log.warning("cannot read the ACLs from ZooKeeper (%r); trying again", e)
                self._full = True
                await asyncio.sleep(1)
                self._wake.set()
            except Exception:  # the loop must outlive anything: later changes still apply
                log.exception("cannot apply the ACL changes")

    async def _children(self, path: str, watch=None) -> list[str]:
        try:
            return await self.session.wait(self.client.get_children_async(path, watch=watch))
        except NoNodeError:
            return []

    async def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AclEntry], int | None]:
        try:
            data, stat = await self.session.wait(self.client.get_async(znode_path(pattern)))
        except NoNodeError:
            return frozenset(), None
        return decode_entries(data), stat.version

    async def _notices(self) -> dict[str, list[tuple[int, str]]]:
        """Per notice folder, its notices in order (watched for new ones)."""
        out = {}
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            names = await self._children(root, self._watch)
            out[root] = sorted((int(n[len(CHANGE_PREFIX):]), n) for n in names
                               if n.startswith(CHANGE_PREFIX) and n[len(CHANGE_PREFIX):].isdigit())
        return out

    async def _load_all(self) -> None:
        notices = await self._notices()  # first: a change made while we read is in a later notice
        patterns = []
        for root in (LITERAL_ROOT, PREFIXED_ROOT):
            for type_name in await self._children(root):
                if type_name in ZK_TYPES:
                    patterns += [pattern_of_path(f"{root}/{type_name}/{name}")
                                 for name in await self._children(f"{root}/{type_name}")]
        by_pattern = {p: (await self._read(p))[0] for p in patterns}
        self.authz.authorizer.replace_all(by_pattern)
        self.authz.acls_changed()
        for root, items in notices.items():
            self._seen[root] = items[-1][0] if items else -1
            for _, name in items:
                stat = await self.session.wait(self.client.exists_async(f"{root}/{name}"))
                if stat is not None:
                    self._notice_times[f"{root}/{name}"] = stat.ctime
        await self._purge()
        log.info("ACLs loaded: %d bindings on %d resource patterns", sum(len(e) for e in by_pattern.values()),
                 len(by_pattern))

    async def _catch_up(self) -> None:
        for root, items in (await self._notices()).items():
            for sequence, name in items:
                if sequence > self._seen.get(root, -1):
                    await self._process(f"{root}/{name}")
                    self._seen[root] = sequence
        await self._purge()

    async def _process(self, path: str) -> None:
        """Apply one notice; one that cannot be understood is logged and skipped (ZooKeeper errors
        are not: everything is read again)."""
        try:
            data, stat = await self.session.wait(self.client.get_async(path))
        except NoNodeError:  # purged already: its change was long applied
            return
        self._notice_times[path] = stat.ctime
        try:
            pattern = pattern_of_notice(path.rsplit("/", 1)[0], data)
            self._apply(pattern, (await self._read(pattern))[0])
        except KazooException:
            raise
        except Exception:
            log.exception("cannot apply the ACL change notice %s (%r); skipped", path, data)

    async def _purge(self) -> None:
        """Delete the notices seen that are older than CHANGE_EXPIRY_S (another broker may have)."""
        expired = time.time() * 1000 - CHANGE_EXPIRY_S * 1000
        for path in [p for p, written in self._notice_times.items() if written < expired]:
            del self._notice_times[path]
            try:
                await self.session.wait(self.client.delete_async(path))
            except (NoNodeError, NotEmptyError):
                continue

    def _apply(self, pattern: ResourcePattern, entries: frozenset[AclEntry]) -> None:
        self.authz.authorizer.replace_pattern(pattern, entries)
        self.authz.acls_changed()

    async def update(self, pattern: ResourcePattern,
                     change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]]) -> frozenset[AclEntry]:
        """Replace the pattern's entries by `change(entries)` (compare-and-set, retried on a race);
        announce it; return the entries it had before."""
        path = znode_path(pattern)
        for _ in range(MAX_TRIES):
            old, version = await self._read(pattern)
            new = frozenset(change(old))
            if new == old:
                return old
            try:
                if not new:
                    await self.session.wait(self.client.delete_async(path, version=version))
                elif version is None:
                    await self.session.wait(self.client.create_async(path, encode_entries(new)))
                else:
                    await self.session.wait(self.client.set_async(path, encode_entries(new), version=version))
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            notice_path, notice = change_notice(pattern)
            await self.session.wait(self.client.create_async(notice_path, notice, sequence=True, makepath=True))
            self._apply(pattern, new)
            return old
        raise KazooException(f"{path} kept changing under {MAX_TRIES} attempts to update it")
