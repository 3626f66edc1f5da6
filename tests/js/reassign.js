// Reassign one partition with kafkajs's admin client and wait until it is no longer listed:
//   node reassign.js BOOTSTRAP TOPIC PARTITION REPLICA[,REPLICA...]
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, partition, replicas] = process.argv.slice(2);
  const admin = new Kafka({ brokers: bootstrap.split(","), logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    await admin.alterPartitionReassignments({
      topics: [{ topic, partitionAssignment: [{ partition: Number(partition), replicas: replicas.split(",").map(Number) }] }],
    });
    for (let i = 0; i < 600; i++) {
      const { topics } = await admin.listPartitionReassignments({});
      if (!topics.some((t) => t.name === topic)) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error("the reassignment did not finish in 60 s");
  } finally {
    await admin.disconnect();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
