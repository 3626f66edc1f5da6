// Produce with kafkajs, as a Node.js program would: node produce.js BOOTSTRAP TOPIC < messages.json
// messages.json: [{"partition": 0, "key": "k", "value": "v", "timestamp": "1700000000000" | null,
//                  "headers": {"name": "value"}}, ...]; "compression": "gzip" in argv[4] to compress.
// Prints the send results (partition, baseOffset) as JSON; exits 1 on an error.
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

async function main () {
  const [bootstrap, topic, compression] = process.argv.slice(2)
  const messages = JSON.parse(require('fs').readFileSync(0, 'utf8'))
  const kafka = new Kafka({ clientId: 'weir-test-kafkajs', brokers: bootstrap.split(','), logLevel: logLevel.ERROR })
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    const results = await producer.send({
      topic,
      acks: -1,
      compression: compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
      messages: messages.map(m => {
        const out = { partition: m.partition, key: m.key, value: m.value, headers: m.headers || {} }
        if (m.timestamp !== null) out.timestamp = m.timestamp
        return out
      })
    })
    console.log(JSON.stringify(results.map(r => ({ partition: r.partition, baseOffset: r.baseOffset }))))
  } finally {
    await producer.disconnect()
  }
}

main().catch(e => { console.error(e); process.exit(1) })
