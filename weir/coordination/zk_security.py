"""Who a ZooKeeper client is, and the ACLs of the znodes it creates (`zookeeper.set.acl`).

Kafka's rule (ZkData.defaultAcls): with `zookeeper.set.acl=true` every znode is created with all
rights for its creator's identity and read rights for everyone, except under the sensitive roots
(/config/users: SCRAM credentials; /config/brokers: broker configs), which nobody else may even
read. Kafka's brokers authenticate to ZooKeeper with SASL (a JAAS `Client` section); Weir's use
ZooKeeper's digest scheme (`addauth digest user:password`), with the credentials in

    zookeeper.digest.jaas.config=org.apache.zookeeper.server.auth.DigestLoginModule required
        username="weir" password="...";

(Weir's setting; the login module is the one ZooKeeper's own DIGEST-MD5 `Client` sections name).
Every broker of a cluster, and every tool that writes its znodes (`weir users --zookeeper
--zk-config-file ...`), must log in as the same user: the "creator" is that identity, not a session.

ZooKeeper's root znode stays open to all: deleting a top-level znode (/controller) is governed by
the root's ACL, so a protected cluster lives under a chroot (`host:2181/weir`), whose znode gets
the ACL above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from weir.config.settings import ConfigError

SENSITIVE_ROOTS = ("/config/users", "/config/brokers")  # Kafka's ZkData.SensitiveRootPaths (it also has /delegation_token)


def znode_acl(path: str) -> list:
    """The ACL Kafka gives a znode it creates with zookeeper.set.acl (path relative to the chroot)."""
    sensitive = any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)
    return list(CREATOR_ALL_ACL) + ([] if sensitive else list(READ_ACL_UNSAFE))


@dataclass(frozen=True)
class ZkSecurity:
    set_acl: bool = False
    username: str = ""
    password: str = ""

    @classmethod
    def from_settings(cls, get: Callable[[str], Any]) -> "ZkSecurity":
        """From `zookeeper.set.acl` and `zookeeper.digest.jaas.config`, as `get(name)` gives them (a
        broker's config, or a tool's properties file)."""
        from weir.security.jaas import JaasError, parse_jaas
        set_acl = str(get("zookeeper.set.acl") or "false").strip().lower() == "true"
        jaas = get("zookeeper.digest.jaas.config") or ""
        try:
            login = parse_jaas(jaas) if jaas.strip() else {}
        except JaasError as e:
            raise ConfigError(f"zookeeper.digest.{e}") from None
        if jaas.strip() and not (login.get("username") and "password" in login):
            raise ConfigError("zookeeper.digest.jaas.config: give username and password")
        if set_acl and not login:
            raise ConfigError("zookeeper.set.acl is true, but there are no credentials to log in to ZooKeeper "
                              "with: set zookeeper.digest.jaas.config")
        return cls(set_acl, login.get("username", ""), login.get("password", ""))

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "ZkSecurity":
        return cls.from_settings(props.get)

    def client(self, hosts: str, **options: Any) -> KazooClient:
        """A kazoo client that logs in with these credentials and, with set_acl, gives every znode it
        creates its ACL."""
        if self.username:
            options["auth_data"] = [("digest", f"{self.username}:{self.password}")]
        return (AclClient if self.set_acl else KazooClient)(hosts=hosts, **options)


class AclClient(KazooClient):
    """Creates every znode, parents included and in transactions, with `znode_acl(path)`."""

    def create_async(self, path, value=b"", acl=None, *args, **kwargs):
        return super().create_async(path, value, znode_acl(path), *args, **kwargs)

    def ensure_path_async(self, path, acl=None):
        return super().ensure_path_async(path)  # each create_async picks its own znode's ACL

    def transaction(self) -> TransactionRequest:
        return AclTransaction(self)


class AclTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):
        return super().create(path, value, znode_acl(path), ephemeral, sequence)
