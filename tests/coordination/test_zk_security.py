"""`zookeeper.set.acl`: Kafka's ACL for each znode, and the settings that turn it on."""

import pytest
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from weir.config.settings import ConfigError
from weir.coordination.zk_security import AclClient, ZkSecurity, znode_acl

LOGIN = 'org.apache.zookeeper.server.auth.DigestLoginModule required username="weir" password="s3cret";'


@pytest.mark.parametrize("path", ["/brokers/ids/0", "/controller", "/config", "/config/topics/t", "/config/usersx"])
def test_creator_may_change_everyone_may_read(path):
    assert znode_acl(path) == list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


@pytest.mark.parametrize("path", ["/config/users", "/config/users/admin", "/config/brokers/<default>"])
def test_sensitive_paths_are_the_creators_alone(path):
    assert znode_acl(path) == list(CREATOR_ALL_ACL)


def test_settings():
    security = ZkSecurity.from_properties({"zookeeper.set.acl": "true", "zookeeper.digest.jaas.config": LOGIN})
    assert (security.set_acl, security.username, security.password) == (True, "weir", "s3cret")
    client = security.client("127.0.0.1:1")
    assert isinstance(client, AclClient) and ("digest", "weir:s3cret") in client.auth_data
    assert type(ZkSecurity.from_properties({}).client("127.0.0.1:1")) is not AclClient
    with pytest.raises(ConfigError, match="zookeeper.digest.jaas.config"):
        ZkSecurity.from_properties({"zookeeper.set.acl": "true"})
    with pytest.raises(ConfigError, match="username and password"):
        ZkSecurity.from_properties({"zookeeper.digest.jaas.config": "x.Y required password=p;"})
