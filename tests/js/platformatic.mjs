// Produce or consume with @platformatic/kafka (pure JavaScript, its own protocol code), as a
// Node.js program would.
//   node platformatic.mjs produce BOOTSTRAP TOPIC CODEC < messages.json
//     messages.json: [{"partition": 0, "key": "k", "value": "v", "timestamp": "1700000000000",
//                      "headers": {"name": "value"}}, ...]; an idempotent producer, acks=all.
//   node platformatic.mjs consume BOOTSTRAP TOPIC GROUP COUNT
//     joins GROUP, reads COUNT messages from the earliest offsets, commits them, prints them as JSON.
// Exits 1 on an error.
import { Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'

const CHUNK = 5000 // messages per send: several batches per partition in flight

async function produce (bootstrap, topic, codec) {
  const messages = JSON.parse((await import('node:fs')).readFileSync(0, 'utf8'))
  const producer = new Producer({ clientId: 'weir-test-platformatic', bootstrapBrokers: bootstrap.split(','),
    serializers: stringSerializers, idempotent: true, acks: -1, compression: codec })
  try {
    for (let i = 0; i < messages.length; i += CHUNK) {
      await producer.send({ messages: messages.slice(i, i + CHUNK).map(m => ({
        topic, partition: m.partition, key: m.key, value: m.value,
        timestamp: BigInt(m.timestamp), headers: new Map(Object.entries(m.headers))
      })) })
    }
  } finally {
    await producer.close()
  }
}

async function consume (bootstrap, topic, group, count) {
  const consumer = new Consumer({ groupId: group, clientId: 'weir-test-platformatic', bootstrapBrokers: bootstrap.split(','),
    deserializers: stringDeserializers, sessionTimeout: 10000, heartbeatInterval: 500 })
  const out = []
  const last = new Map() // partition -> its last message read
  try {
    const stream = await consumer.consume({ topics: [topic], mode: 'earliest', autocommit: false })
    for await (const m of stream) {
      out.push({ partition: m.partition, offset: String(m.offset), key: m.key, value: m.value,
        timestamp: String(m.timestamp), headers: [...m.headers.entries()] })
      last.set(m.partition, m)
      if (out.length === count) break
    }
    for (const m of last.values()) await m.commit() // the offset after it, for its partition
    await stream.close()
  } finally {
    await consumer.close()
  }
  console.log(JSON.stringify(out))
}

const [mode, bootstrap, topic, ...rest] = process.argv.slice(2)
const run = mode === 'produce' ? produce(bootstrap, topic, rest[0]) : consume(bootstrap, topic, rest[0], Number(rest[1]))
run.catch(e => { console.error(e); process.exit(1) })
