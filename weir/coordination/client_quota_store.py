"""Client quotas in ZooKeeper (weir.quotas.entities's layout, Kafka's), kept current on every broker.

A broker reads every quota entity at start and after a new session into its `QuotaBook`. A
change (AlterClientQuotas, on any broker) compare-and-sets the entity's znode - keeping the SCRAM
credentials a user's znode also holds - and then writes a /config/changes notice, as Kafka's
AdminZkClient.changeConfigs; every broker follows the notices (weir.coordination.change_notices)
and re-reads the entity named, so a change applies cluster-wide without a restart, and a
restarted broker reads what is stored. Notices about topics or brokers are not ours (Weir
watches those znodes themselves) and are passed over.

As Kafka's tryCleanQuotaNodes, an entity left with no config and no children is deleted (with
its users/<u>/clients parent and the user's znode, once they are empty too), so that quotas set
and removed do not leave znodes behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError

from weir.coordination.change_notices import ChangeNotices, children
from weir.quotas.client_quotas import QuotaBook
from weir.quotas.entities import (CHANGE_PREFIX, CHANGES_PATH, CLIENT_ID, CONFIG_PATH, ROOTS, USER, Entity, alter,
                                  decode_config, encode_config, encode_notice, entity_of_path, entity_path,
                                  notice_entity)

log = logging.getLogger(__name__)

MAX_TRIES = 20


class ClientQuotaStore:
    """Over a weir.coordination.zk_client.ZkSession; keeps `book` current and calls
    `on_change()` after each change to it."""

    def __init__(self, session, book: QuotaBook, on_change: Callable[[], None] = lambda: None) -> None:
        self.session = session
        self.client = session.client
        self.book = book
        self.on_change = on_change
        self.notices = ChangeNotices(session, [CHANGES_PATH], CHANGE_PREFIX, self._load_all, self._process,
                                     "client quota")

    async def start(self) -> None:
        await self.notices.start()

    async def stop(self) -> None:
        await self.notices.stop()

    async def _read(self, e: Entity) -> tuple[dict[str, str], int | None]:
        try:
            data, stat = await self.session.wait(self.client.get_async(f"{CONFIG_PATH}/{entity_path(e)}"))
        except NoNodeError:
            return {}, None
        return decode_config(data), stat.version

    async def read_all(self) -> dict[Entity, dict[str, str]]:
        """Every stored entity of users, users/<u>/clients, clients and ips with its config."""
        paths = []
        for root in ROOTS.values():
            paths += [f"{root}/{name}" for name in await children(self.session, f"{CONFIG_PATH}/{root}")]
        users = [p for p in paths if p.startswith(ROOTS[USER] + "/")]
        listed = await self.session.wait_all(self.client.get_children_async(f"{CONFIG_PATH}/{u}/clients")
                                             for u in users)  # pipelined: one round trip for every user
        for user, clients in zip(users, listed):
            if isinstance(clients, NoNodeError):
                continue
            if isinstance(clients, Exception):
                raise clients
            paths += [f"{user}/clients/{c}" for c in clients]
        entities = [(entity_of_path(p), p) for p in paths]
        entities = [(e, p) for e, p in entities if e is not None]
        results = await self.session.wait_all(self.client.get_async(f"{CONFIG_PATH}/{p}") for _, p in entities)
        out = {}
        for (e, _), result in zip(entities, results):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, Exception):
                raise result
            out[e] = decode_config(result[0])
        return out

    async def _load_all(self) -> None:
        configs = await self.read_all()
        self.book.replace_all(configs)
        self.on_change()
        log.info("client quotas loaded: %d entities with quotas", sum(1 for c in configs.values() if c))

    async def _process(self, root: str, data: bytes) -> None:
        e = notice_entity(data)
        if e is None:
            return
        self._apply(e, (await self._read(e))[0])

    def _apply(self, e: Entity, config: dict[str, str]) -> None:
        self.book.set(e, config)
        self.on_change()

    async def alter(self, e: Entity, ops: Iterable[tuple[str, float, bool]], validate_only: bool = False) -> None:
        """Apply AlterClientQuotas' operations to the entity (QuotaError if Kafka would refuse
        them); unless `validate_only`, store the result (compare-and-set, retried on a race) and
        announce it."""
        ops = list(ops)
        path = f"{CONFIG_PATH}/{entity_path(e)}"
        for _ in range(MAX_TRIES):
            old, version = await self._read(e)
            new = alter(e, old, ops)
            if validate_only:
                return
            try:
                if not new:
                    await self._delete_empty(e, version)
                elif version is None:
                    await self.session.wait(self.client.create_async(path, encode_config(new), makepath=True))
                else:
                    await self.session.wait(self.client.set_async(path, encode_config(new), version=version))
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            await self.session.wait(self.client.create_async(f"{CHANGES_PATH}/{CHANGE_PREFIX}", encode_notice(e),
                                                             sequence=True, makepath=True))
            self._apply(e, new)
            log.info("client quotas of %s: %s", entity_path(e), new or "none")
            return
        raise KazooException(f"{path} kept changing under {MAX_TRIES} attempts to update it")

    async def _delete_empty(self, e: Entity, version: int | None) -> None:
        """An entity with nothing left: its znode goes, unless it has children (a user with
        per-client quotas), in which case it is emptied; then its empty parents."""
        path = f"{CONFIG_PATH}/{entity_path(e)}"
        if version is None:
            return
        try:
            await self.session.wait(self.client.delete_async(path, version=version))
        except NotEmptyError:
            await self.session.wait(self.client.set_async(path, encode_config({}), version=version))
            return
        names = dict(e)
        if USER in names and CLIENT_ID in names:
            user_path = path.rsplit("/", 2)[0]
            for parent in (f"{user_path}/clients", user_path):
                try:
                    if parent == user_path:
                        data, stat = await self.session.wait(self.client.get_async(parent))
                        if decode_config(data):
                            return
                        await self.session.wait(self.client.delete_async(parent, version=stat.version))
                    else:
                        await self.session.wait(self.client.delete_async(parent))
                except (NotEmptyError, NoNodeError, BadVersionError):
                    return
