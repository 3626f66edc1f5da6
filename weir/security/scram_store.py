"""SCRAM credentials in ZooKeeper, as Kafka's ZooKeeper mode keeps them:

    /config/users/<user>   {"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=4096"}}

where <user> is the user name URL-encoded as Kafka's Sanitizer.sanitize does (so 'a/b' is a%2Fb,
and every name is one znode). ZooKeeper refuses the names '.' and '..', which Kafka leaves as
they are (and then fails on); Weir encodes their dots, which Sanitizer.desanitize reads back.

A broker reads the credential when a client authenticates (kept for at most CACHE_S, so that a
flood of logins does not become a flood of ZooKeeper reads), so a new or changed user counts within
a second on every broker, and needs no change notice. Writes compare-and-set the znode's version
and keep what else the znode holds: the user's quotas (weir.quotas.entities), which do have
change notices.
"""

import time
from collections import OrderedDict
from collections.abc import Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from weir.protocol.scram import ScramCredential, ScramError
from weir.quotas.entities import decode_config, encode_config
from weir.zk.formats import desanitize, sanitize

USERS_PATH = "/config/users"
CACHE_S = 1.0
CACHE_MAX_USERS = 10_000


class ConcurrentChange(Exception):
    pass


def user_path(user: str) -> str:
    return f"{USERS_PATH}/{sanitize(user)}"


class ScramCredentialStore:
    """Over a weir.coordination.zk_client.ZkSession."""

    def __init__(self, session) -> None:
        self.session = session
        self.client = session.client
        self._cache: OrderedDict[str, tuple[float, dict[str, str]]] = OrderedDict()  # user → (read at, config)

    async def _read(self, user: str) -> tuple[dict[str, str], int | None]:
        try:
            data, stat = await self.session.wait(self.client.get_async(user_path(user)))
        except NoNodeError:
            return {}, None
        return decode_config(data), stat.version

    async def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        if not user or len(user) > 1024:
            return None
        now = time.monotonic()
        cached = self._cache.get(user)
        if cached is not None and now - cached[0] < CACHE_S:
            config = cached[1]
        else:
            config, _ = await self._read(user)
            self._cache[user] = (now, config)
            self._cache.move_to_end(user)
            while len(self._cache) > CACHE_MAX_USERS:
                self._cache.popitem(last=False)
        try:
            return ScramCredential.decode(config[mechanism]) if mechanism in config else None
        except ScramError:
            return None

    async def users(self) -> list[str]:
        try:
            names = await self.session.wait(self.client.get_children_async(USERS_PATH))
        except NoNodeError:
            return []
        return sorted(desanitize(name) for name in names)

    async def mechanisms(self, user: str) -> dict[str, int]:
        """{mechanism: iterations} of the user's SCRAM credentials."""
        config, _ = await self._read(user)
        out = {}
        for mechanism, text in config.items():
            if mechanism.startswith("SCRAM-"):
                try:
                    out[mechanism] = ScramCredential.decode(text).iterations
                except ScramError:
                    continue
        return out

    async def change(self, user: str, upserts: dict[str, ScramCredential], deletions: Iterable[str]) -> None:
        """Set and remove some of a user's credentials in one compare-and-set write."""
        self._cache.pop(user, None)
        config, version = await self._read(user)
        for mechanism in deletions:
            config.pop(mechanism, None)
        for mechanism, credential in upserts.items():
            config[mechanism] = credential.encode()
        data = encode_config(config)
        path = user_path(user)
        try:
            if version is None:
                await self.session.wait(self.client.create_async(path, data, makepath=True))
            else:
                await self.session.wait(self.client.set_async(path, data, version=version))
        except (BadVersionError, NodeExistsError):
            raise ConcurrentChange(f"{path} changed meanwhile") from None


def write_credential(client, user: str, mechanism: str, credential: ScramCredential) -> None:
    """The same write with a plain (synchronous) kazoo client: `weir up --secure` creates its
    admin user before any broker runs, as `kafka-configs --zookeeper` would."""
    path = user_path(user)
    try:
        data, stat = client.get(path)
        config, version = decode_config(data), stat.version
    except NoNodeError:
        config, version = {}, None
    config[mechanism] = credential.encode()
    if version is None:
        client.create(path, encode_config(config), makepath=True)
    else:
        client.set(path, encode_config(config), version=version)
