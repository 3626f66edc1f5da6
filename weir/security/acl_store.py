"""ACLs in ZooKeeper (weir.security.acls's layout, Kafka's), kept current on every broker.

A broker reads every ACL znode at start and after a new session. A change (CreateAcls, DeleteAcls,
on any broker) compare-and-sets the pattern's znode and then writes a sequential change notice;
every broker watches the two notice folders and re-reads the patterns named by notices it has not
seen (weir.coordination.change_notices, Kafka's ZkNodeChangeNotificationListener), so a change
counts cluster-wide within a ZooKeeper round trip, without a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from weir.coordination.change_notices import ChangeNotices, children
from weir.security.acls import (CHANGE_PREFIX, EXTENDED_CHANGES, LITERAL_CHANGES, LITERAL_ROOT, PREFIXED_ROOT, ZK_TYPES,
                                AclEntry, ResourcePattern, change_notice, decode_entries, encode_entries,
                                pattern_of_notice, pattern_of_path, znode_path)
from weir.security.authorization import RequestAuthorizer

log = logging.getLogger(__name__)

MAX_TRIES = 20


class AclStore:
    """Over a weir.coordination.zk_client.ZkSession; feeds `authz`'s Authorizer."""

    def __init__(self, session, authz: RequestAuthorizer) -> None:
        self.session = session
        self.client = session.client
        self.authz = authz
        self.notices = ChangeNotices(session, [LITERAL_CHANGES, EXTENDED_CHANGES], CHANGE_PREFIX, self._load_all,
                                     self._process, "ACL")

    async def start(self) -> None:
        for root in (LITERAL_ROOT, PREFIXED_ROOT):  # Kafka's createAclPaths (the notice folders: ChangeNotices)
            for type_name in ZK_TYPES:
                await self.session.wait(self.client.ensure_path_async(f"{root}/{type_name}"))
        await self.notices.start()

    async def stop(self) -> None:
        await self.notices.stop()

    async def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AclEntry], int | None]:
        try:
            data, stat = await self.session.wait(self.client.get_async(znode_path(pattern)))
        except NoNodeError:
            return frozenset(), None
        return decode_entries(data), stat.version

    async def _load_all(self) -> None:
        patterns = []
        for root in (LITERAL_ROOT, PREFIXED_ROOT):
            for type_name in await children(self.session, root):
                if type_name in ZK_TYPES:
                    patterns += [pattern_of_path(f"{root}/{type_name}/{name}")
                                 for name in await children(self.session, f"{root}/{type_name}")]
        by_pattern = {p: (await self._read(p))[0] for p in patterns}
        self.authz.authorizer.replace_all(by_pattern)
        self.authz.acls_changed()
        log.info("ACLs loaded: %d bindings on %d resource patterns", sum(len(e) for e in by_pattern.values()),
                 len(by_pattern))

    async def _process(self, root: str, data: bytes) -> None:
        pattern = pattern_of_notice(root, data)
        self._apply(pattern, (await self._read(pattern))[0])

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
