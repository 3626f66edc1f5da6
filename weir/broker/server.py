"""The broker process: ZooKeeper session, metadata, controller, listener, and periodic work.

Start-up order matters: logs are opened first, then the ZooKeeper session and the metadata view,
then the listener (so peers can fetch), then the registration that makes this broker live, and
only then does it take up its partition roles and run for controller.
"""

import asyncio
import logging
import signal
import time

from kazoo.exceptions import NodeExistsError

from weir.broker.acl_apis import AclApis
from weir.broker.admin_apis import AdminApis
from weir.broker.apis import DataApis
from weir.broker.connection import Connection
from weir.broker.controller_service import ControllerService
from weir.broker.descriptors import raise_open_files_limit
from weir.broker.group_apis import GroupApis
from weir.broker.group_coordinator import GroupCoordinator
from weir.broker.isr_sender import send_isr_changes
from weir.broker.log_cleaner import LogCleaner
from weir.broker.metrics import BrokerMetrics
from weir.broker.metrics import serve as serve_metrics
from weir.broker.quota_apis import QuotaApis
from weir.broker.reassignment_apis import ReassignmentApis
from weir.broker.replica_fetcher import ReplicaFetchers
from weir.broker.replica_manager import ReplicaManager
from weir.broker.scram_apis import ScramApis
from weir.broker.throttles import ClientThrottles
from weir.broker.txn_apis import TransactionApis
from weir.broker.txn_coordinator import TransactionCoordinatorShell
from weir.broker.txn_markers import TxnMarkerApis
from weir.broker.txn_verification import TxnVerifier
from weir.client import BrokerConnection
from weir.clock import now_ms
from weir.config.broker_config import BrokerConfig
from weir.config.settings import DEFAULT_ENTITY
from weir.coordination.client_quota_store import ClientQuotaStore
from weir.coordination.producer_ids import ProducerIdAllocator
from weir.coordination.zk_client import BrokerIdInUse, KazooState, ZkSession
from weir.coordination.zk_metadata import ZkMetadataStore
from weir.coordination.zk_security import ZkSecurity
from weir.coordination.zk_watcher import MetadataWatcher
from weir.replication.fetch_sessions import FetchSessionCache
from weir.replication.shutdown_wait import ASK, GAVE_UP, MOVED, WAIT, ShutdownWait
from weir.security.acl_store import AclStore
from weir.security.acls import Authorizer
from weir.security.authorization import RequestAuthorizer
from weir.security.broker_security import inter_broker_security, listener_security
from weir.security.scram_store import ScramCredentialStore
from weir.zk.formats import CONTROLLED_SHUTDOWN_PATH

log = logging.getLogger(__name__)

# Watcher events about one topic: applied to its partitions alone (other kinds: to every partition)
TOPIC_EVENTS = frozenset({"topic", "topic_deleted", "config"})
TOPIC_EVENT = object()  # the mark of a topic's name among the pending partition keys

PRODUCE_EXPIRY_CHECK_MS = 100
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30



class BrokerApis:
    """Every handler this broker serves, by api key."""

    def __init__(self, data: DataApis, admin: AdminApis, reassignment: ReassignmentApis, groups: GroupApis,
                 transactions: TransactionApis, metrics: BrokerMetrics, txn_markers: TxnMarkerApis,
                 scram: ScramApis | None = None, acls: AclApis | None = None,
                 quotas: QuotaApis | None = None) -> None:
        self.handlers = {**data.handlers, **admin.handlers, **reassignment.handlers, **groups.handlers,
                         **transactions.handlers, **txn_markers.handlers, **(scram.handlers if scram else {}),
                         **(acls.handlers if acls else {}), **(quotas.handlers if quotas else {})}
        self.throttles = data.throttles  # client quotas, which the connections apply
        self.api_versions_body = data.api_versions_body
        self.metrics = metrics
        self.scram_credential = scram.store.credential if scram else None


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config["broker.id"]
        # what each listener asks of its clients, and how we reach our peers (ConfigError if unusable)
        self.listener_security = {l.name: listener_security(config, l) for l in config.listeners}
        self.peer_security = inter_broker_security(config)
        self.zk_security = ZkSecurity.from_settings(config.__getitem__)
        self._tasks: list[asyncio.Task] = []
        self.cleaner: LogCleaner | None = None
        self._peers: dict[int, BrokerConnection] = {}
        self._pending_keys: set | None = None
        self._registered = False
        self._started = False  # ZooKeeper events before this are for start() alone
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])

    # -- start -------------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        if config.no_effect:
            log.info("accepted, no effect in Weir: %s", ", ".join(sorted(config.no_effect)))
        raise_open_files_limit()  # before any log is opened: the replicas' budget follows from it
        self.replicas = ReplicaManager(config, now_ms())
        self.zk = ZkSession(config["zookeeper.connect"], session_timeout_s=config["zookeeper.session.timeout.ms"] / 1000,
                            on_state=self._on_zk_state, security=self.zk_security)
        await self.zk.start(config["zookeeper.connection.timeout.ms"] / 1000)
        authz = self.acl_store = None
        if config["authorizer.class.name"]:  # ACLs on: read them before serving anyone
            super_users = [u.strip() for u in config["super.users"].split(";") if u.strip()]
            log.info("ACLs on (%s); super users: %s (the brokers' own principal must be one of them)",
                     config["authorizer.class.name"], ", ".join(super_users) or "none")
            authz = RequestAuthorizer(Authorizer(super_users, config["allow.everyone.if.no.acl.found"]))
            self.acl_store = AclStore(self.zk, authz)
            await self.acl_store.start()
        # client quotas: read before serving anyone, followed on every change (/config/changes)
        self.throttles = ClientThrottles(config["quota.window.num"], config["quota.window.size.seconds"],
                                         config["controller.quota.window.num"],
                                         config["controller.quota.window.size.seconds"])
        self.quota_store = ClientQuotaStore(self.zk, self.throttles.book, self.throttles.quotas_changed)
        await self.quota_store.start()
        self.store = ZkMetadataStore(self.zk, on_controller_gone=lambda: self.controller.elect())
        await self.store.ensure_paths()
        self.watcher = MetadataWatcher(self.zk, on_change=self._on_metadata_change)
        self.controller = ControllerService(config, self.store, self.watcher, self.replicas.metrics)
        self.fetchers = ReplicaFetchers(self.replicas, config, self._connect_fresh)
        self.replicas.on_role_change = self.fetchers.on_role_change
        self.replicas.on_log_start_moved = self.fetchers.on_log_start_moved
        self.admin = AdminApis(self.replicas, self.store, self.controller, authz, self.throttles)
        # consumer groups and transactions: the coordinators follow the roles of the
        # __consumer_offsets and __transaction_state partitions
        self.transactions = TransactionCoordinatorShell(self.replicas, config, self.admin.create_topic,
                                                        ProducerIdAllocator(self.zk, self.broker_id).next_id,
                                                        self._connect_fresh)
        # KIP-890: Produce and TxnOffsetCommit ask the transaction coordinator the same way
        self.txn_verifier = TxnVerifier(self.replicas, self._connect_cached)
        self.groups = GroupCoordinator(self.replicas, config, self.admin.create_topic, self.txn_verifier.verify)
        # a Metadata request may auto-create them: with their coordinators' partitions and configs
        self.admin.internal_topics = {topic.name: topic for topic in (self.groups.offsets_topic,
                                                                      self.transactions.state_topic)}
        # the WriteTxnMarkers handler tells the group coordinator of markers in __consumer_offsets
        self.replicas.on_offsets_marker = self.groups.complete_transaction
        follow_fetchers = self.replicas.on_role_change
        self.replicas.on_role_change = lambda p: (follow_fetchers(p), self.groups.on_role_change(p),
                                                  self.transactions.on_role_change(p))
        self.groups.start()
        self.transactions.start()
        self._started = True
        await self.watcher.start()
        self.replicas.view = self.watcher.view  # until we lead, requests see NOT_LEADER_OR_FOLLOWER, not "no topic"
        data = DataApis(self.replicas, self.txn_verifier, authz, self.fetch_sessions, self.throttles)
        self.replicas.hosting.fetch_sessions = self.fetch_sessions
        apis = BrokerApis(data, self.admin, ReassignmentApis(self.controller, authz),
                          GroupApis(self.groups, self.transactions, authz),
                          TransactionApis(self.transactions, self.groups.offsets_partition_count, authz),
                          self.replicas.metrics, TxnMarkerApis(self.replicas, authz),
                          ScramApis(ScramCredentialStore(self.zk), authz), AclApis(authz, self.acl_store),
                          QuotaApis(self.quota_store, authz))
        self.servers = []
        for listener in config.listeners:  # one server per listener, each with its security protocol
            security = self.listener_security[listener.name]
            self.servers.append(await loop.create_server(
                lambda listener=listener, security=security: Connection(
                    apis, config["socket.request.max.bytes"], listener.name,
                    security if listener.protocol != "PLAINTEXT" else None, config["connections.max.idle.ms"]),
                listener.host, listener.port, reuse_address=True, backlog=1024, ssl=security.ssl_context,
                ssl_handshake_timeout=min(security.idle_ms, 60000) / 1000 if security.ssl_context else None))
        self.server = self.servers[0]
        host, port = config.listener
        self.metrics_server = None
        if config["metrics.port"] >= 0:
            self.replicas.metrics.collect_state(self)
            try:
                self.metrics_server = await serve_metrics(self.replicas.metrics, host, config["metrics.port"])
                log.info("metrics on http://%s:%d/metrics", host, self.metrics_server.sockets[0].getsockname()[1])
            except OSError as e:  # a taken port costs the metrics, not the broker
                log.error("metrics.port %d: %s; serving no metrics", config["metrics.port"], e)
        await self._register()
        self.replicas.can_lead = True
        self.replicas.apply_view(self.watcher.view, now_ms())
        await self.controller.start()
        await self._wait_for_controller()
        if config["log.cleaner.enable"]:
            self.cleaner = LogCleaner(self.replicas, loop)
            self.cleaner.start()
        self._tasks = [loop.create_task(t) for t in (
            self._every(config["log.retention.check.interval.ms"], self.replicas.maintain),
            self._every(1000, self.replicas.flush_due),
            self._every(config["log.flush.offset.checkpoint.interval.ms"], lambda now: self.replicas.checkpoint()),
            self._every(config["replica.lag.time.max.ms"] // 2, self.replicas.check_isr),
            self._every(PRODUCE_EXPIRY_CHECK_MS, self.replicas.expire_produces),
            send_isr_changes(self.replicas, self._connect_cached),
        )]
        log.info("broker %d listening on %s (log.dirs=%s, zookeeper.connect=%s)", self.broker_id,
                 ", ".join(f"{l.endpoint()} ({l.protocol})" for l in config.listeners),
                 config["log.dirs"], config["zookeeper.connect"])

    async def _wait_for_controller(self) -> None:
        """Clients look for the controller in Metadata (CreateTopics goes there): be ready only
        once the cluster has one."""
        deadline = time.monotonic() + self.config["zookeeper.session.timeout.ms"] / 1000 + 30
        while self.watcher.view.controller_id < 0 and time.monotonic() < deadline:
            await self.replicas.waiters.wait([self.replicas.VIEW_CHANGED], deadline - time.monotonic())

    async def _register(self) -> None:
        """Make this broker live. After a kill -9 the old session's registration lingers until
        ZooKeeper expires it; wait for that rather than fail."""
        host, port = self.config.advertised
        listeners = [(a.name, a.protocol, a.host, a.port) for a in self.config.advertised_listeners]
        deadline = time.monotonic() + self.config["zookeeper.session.timeout.ms"] / 1000 + 30
        while True:
            try:
                await self.zk.register_broker(self.broker_id, host, port, rack=self.config["broker.rack"] or None,
                                              listeners=listeners)
                self._registered = True
                return
            except BrokerIdInUse:
                if time.monotonic() > deadline:
                    raise
                log.info("broker id %d is still held by an old session; waiting for it to expire", self.broker_id)
                await asyncio.sleep(1)

    async def _every(self, interval_ms: int, work) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                work(now_ms())
            except Exception:
                log.exception("periodic task failed")

    # -- peers ---------------------------------------------------------------------------

    async def _connect_fresh(self, broker_id: int) -> BrokerConnection:
        broker = self.replicas.view.brokers.get(broker_id)
        if broker is None:
            raise OSError(f"broker {broker_id} is not registered")
        address = broker.address(self.config.inter_broker_listener_name)
        if address is None:
            raise OSError(f"broker {broker_id} has no listener {self.config.inter_broker_listener_name}")
        return await BrokerConnection.open(*address, client_id=f"weir-broker-{self.broker_id}",
                                           security=self.peer_security,
                                           timeout_s=self.config["request.timeout.ms"] / 1000)

    async def _connect_cached(self, broker_id: int) -> BrokerConnection:
        conn = self._peers.get(broker_id)
        if conn is None or conn.closed:
            conn = self._peers[broker_id] = await self._connect_fresh(broker_id)
        return conn

    # -- ZooKeeper events ----------------------------------------------------------------

    def _on_zk_state(self, state: str) -> None:
        if not self._started:
            return
        if state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended: no acknowledgements until it is back")
            self.replicas.lose_leadership_proof()
        elif state == KazooState.LOST:
            log.warning("ZooKeeper session lost")
            self.replicas.lose_leadership_proof()
            self._registered = False
            self.controller.on_session_lost()
        elif state == KazooState.CONNECTED and not self.zk.closing:
            asyncio.get_running_loop().create_task(self._reconnected())

    async def _reconnected(self) -> None:
        if not self._registered:
            await self._register()
            self.controller.elect()
        await self.watcher.wait_current(60)
        self.replicas.can_lead = True
        self.replicas.apply_view(self.watcher.view, now_ms())
        log.info("ZooKeeper session is back; leading again where the controller says so")

    def _on_metadata_change(self, kind: str, key) -> None:
        """Coalesce a burst of watcher events into one pass over the affected partitions."""
        if kind in ("stale", "current"):
            if kind == "current":
                self.controller.on_metadata_change(kind, key)
            return
        if self._pending_keys is None:
            self._pending_keys = set()
            asyncio.get_running_loop().call_soon(self._apply_pending)
        self._pending_keys.add(key if kind == "partition" else (TOPIC_EVENT, key) if kind in TOPIC_EVENTS else "all")
        if kind == "config":
            self.replicas.on_topic_config_changed(key, int(time.time() * 1000))
        elif kind == "broker_config":
            self._take_dynamic_configs()
        self.admin.metadata_changed(kind, key)
        self.controller.on_metadata_change(kind, key)

    def _take_dynamic_configs(self) -> None:
        """Dynamic broker configs changed in ZooKeeper (KIP-226): ours over the cluster's default."""
        dynamic = self.watcher.view.broker_configs
        changed = self.config.set_dynamic(dynamic.get(DEFAULT_ENTITY, {}), dynamic.get(str(self.broker_id), {}))
        if changed:
            log.info("dynamic broker configs: %s", ", ".join(f"{n}={self.config[n]}" for n in sorted(changed)))
            self.replicas.on_broker_config_changed(now_ms())
            self.controller.on_broker_config_changed(changed)

    def _apply_pending(self) -> None:
        keys, self._pending_keys = self._pending_keys, None
        if not self.replicas.can_lead and not self._registered:
            return
        if "all" in keys:
            self.replicas.apply_view(self.watcher.view, now_ms())
            return
        topics = {key[1] for key in keys if key[0] is TOPIC_EVENT}
        self.replicas.apply_view(self.watcher.view, now_ms(), [key for key in keys if key[0] is not TOPIC_EVENT],
                                 topics)

    # -- stop ----------------------------------------------------------------------------

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away, and wait until it has (or cannot). The
        request is an ephemeral znode, gone with the session it was made in: registered again
        meanwhile, the broker asks again, as it does controlled.shutdown.retry.backoff.ms after a
        request that failed (as Kafka's retries its ControlledShutdown)."""
        wait = ShutdownWait(time.monotonic() + CONTROLLED_SHUTDOWN_TIMEOUT_S,
                            self.config["controlled.shutdown.retry.backoff.ms"] / 1000,
                            self.config["controlled.shutdown.max.retries"])
        await self._ask_controlled_shutdown(wait, self._registration())
        while (step := wait.next_step(self.replicas.partitions.values(), registration := self._registration(),
                                      time.monotonic())) in (ASK, WAIT):
            if step == ASK:
                await self._ask_controlled_shutdown(wait, registration, again=True)
            else:
                await self.replicas.waiters.wait([self.replicas.VIEW_CHANGED],
                                                 wait.next_check(time.monotonic()) - time.monotonic())
        if step == MOVED:
            log.info("controlled shutdown: leadership moved")
        elif step == GAVE_UP:
            log.warning("controlled shutdown: %d requests failed (controlled.shutdown.max.retries); stopping anyway",
                        wait.failures)
        else:
            log.warning("controlled shutdown timed out; stopping anyway")

    def _registration(self) -> int | None:
        """Our broker epoch, None while our view does not show our registration."""
        epoch = self.replicas.own_broker_epoch()
        return None if epoch == -1 else epoch

    async def _ask_controlled_shutdown(self, wait: ShutdownWait, registration: int | None, *,
                                       again: bool = False) -> None:
        path = f"{CONTROLLED_SHUTDOWN_PATH}/{self.broker_id}"
        # kazoo holds a request while it cannot reach ZooKeeper, and may keep trying for ever: a
        # request not answered within a session timeout (or by the deadline) has failed
        answer_s = min(self.config["zookeeper.session.timeout.ms"] / 1000, max(wait.deadline - time.monotonic(), 0))
        try:
            async with asyncio.timeout(answer_s):
                await self.zk.wait(self.zk.client.create_async(path, b"", ephemeral=True, makepath=True))
        except NodeExistsError:
            pass  # asked already in this session (or an old session's request stands until it expires)
        except Exception as e:
            wait.ask_failed(time.monotonic())
            log.warning("cannot request controlled shutdown (attempt %d of %d): %r%s", wait.failures, wait.max_attempts,
                        e, f"; asking again in {wait.retry_backoff:.1f} s" if wait.failures < wait.max_attempts else "")
            return
        if again:
            log.info("controlled shutdown: asked again")
        wait.asked(registration)

    async def stop(self) -> None:
        if self.config["controlled.shutdown.enable"]:
            await self.controlled_shutdown()
        await self.controller.stop()
        self.groups.stop()
        await self.transactions.stop()
        for task in self._tasks:
            task.cancel()
        await self.fetchers.close()
        if self.cleaner is not None:
            await asyncio.to_thread(self.cleaner.stop)
        for server in self.servers:
            server.close()
        for conn in self._peers.values():
            await conn.close()
        await self.watcher.stop()
        if self.acl_store is not None:
            await self.acl_store.stop()
        await self.quota_store.stop()
        await self.store.close()
        await self.zk.close()
        self.replicas.close()
        log.info("broker %d shut down cleanly", self.broker_id)

    async def run_until_signalled(self) -> None:
        await self.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"weir broker {self.broker_id} ready on {self.config.advertised[0]}:{self.config.advertised[1]}",
              flush=True)
        await stop.wait()
        await self.stop()
