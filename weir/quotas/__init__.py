"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-257, KIP-546), pure: no I/O, no clock.

- `rate`: Kafka's Rate over a SampledStat (`quota.window.num` windows of `quota.window.size.seconds`)
  and the throttle time of a violation (QuotaUtils.throttleTime).
- `entities`: quota entities, their configs' keys and types, the validation of AlterClientQuotas,
  the ZooKeeper paths (/config/users, /config/clients, /config/ips) and change notices.
- `describe`: DescribeClientQuotas' filter over the stored entities.
- `client_quotas`: the configured quotas, resolved from most to least specific (KIP-55), and the
  per-entity rates that turn a recorded value into a throttle time.
"""
