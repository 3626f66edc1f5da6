"""How DescribeConfigs, AlterConfigs and IncrementalAlterConfigs number config resources and
operations (Kafka's ConfigResource.Type and AlterConfigOp.OpType)."""

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
