// Apache kafka-clients (the Java client) for the client quota tests: steps run in one JVM, each
// printing one JSON line. Steps, separated by "--":
//   alter <client id> <key=value>...        AlterClientQuotas for a client id
//   describe                                DescribeClientQuotas of every entity
//   topic <name>                            CreateTopics, one partition
//   produce <topic> <client id> <bytes>     records of 16 KiB, acks=1; elapsed ms, the throttle time seen
//   consume <topic> <client id> <bytes>     partition 0 from the start; elapsed ms, the throttle time seen
//   bg <step>                               the step in a thread of its own, beside the steps after it
//   join                                    wait for the steps started with bg
// Usage: java -cp <jars>:<classes> QuotaClients <bootstrap> <step> [-- <step>]...

import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.quota.*;
import org.apache.kafka.common.serialization.*;

public class QuotaClients {
    static final int RECORD = 16 * 1024;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        List<String> step = new ArrayList<>();
        List<Thread> background = new ArrayList<>();
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        for (int i = 1; i <= args.length; i++) {
            if (i < args.length && !args[i].equals("--")) {
                step.add(args[i]);
                continue;
            }
            if (step.get(0).equals("bg")) {
                List<String> inner = new ArrayList<>(step.subList(1, step.size()));
                Thread thread = new Thread(() -> {
                    try {
                        run(bootstrap, inner);
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                });
                thread.start();
                background.add(thread);
            } else if (step.get(0).equals("join")) {
                for (Thread thread : background) thread.join();
                background.clear();
            } else {
                run(bootstrap, step);
            }
            step = new ArrayList<>();
        }
        for (Thread thread : background) thread.join();
        if (!failures.isEmpty()) throw new RuntimeException(failures.get(0));
    }

    static Properties props(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        return p;
    }

    static void run(String bootstrap, List<String> step) throws Exception {
        switch (step.get(0)) {
            case "alter": alter(bootstrap, step.get(1), step.subList(2, step.size())); break;
            case "describe": describe(bootstrap); break;
            case "topic": topic(bootstrap, step.get(1)); break;
            case "produce": produce(bootstrap, step.get(1), step.get(2), Long.parseLong(step.get(3))); break;
            case "consume": consume(bootstrap, step.get(1), step.get(2), Long.parseLong(step.get(3))); break;
            default: throw new IllegalArgumentException("unknown step " + step);
        }
    }

    static void alter(String bootstrap, String clientId, List<String> settings) throws Exception {
        List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
        for (String setting : settings) {
            String[] kv = setting.split("=", 2);
            ops.add(new ClientQuotaAlteration.Op(kv[0], Double.parseDouble(kv[1])));
        }
        ClientQuotaEntity entity = new ClientQuotaEntity(Collections.singletonMap(ClientQuotaEntity.CLIENT_ID, clientId));
        try (Admin admin = Admin.create(props(bootstrap, "quota-admin"))) {
            admin.alterClientQuotas(Collections.singletonList(new ClientQuotaAlteration(entity, ops))).all().get();
        }
        System.out.println("{\"altered\": \"" + clientId + "\"}");
    }

    static void describe(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(props(bootstrap, "quota-admin"))) {
            Map<ClientQuotaEntity, Map<String, Double>> found =
                admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
            StringBuilder out = new StringBuilder("{\"quotas\": [");
            String sep = "";
            for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
                out.append(sep).append("{\"entity\": {");
                String inner = "";
                for (Map.Entry<String, String> part : e.getKey().entries().entrySet()) {
                    out.append(inner).append('"').append(part.getKey()).append("\": ")
                       .append(part.getValue() == null ? "null" : "\"" + part.getValue() + "\"");
                    inner = ", ";
                }
                out.append("}, \"values\": {");
                inner = "";
                for (Map.Entry<String, Double> value : e.getValue().entrySet()) {
                    out.append(inner).append('"').append(value.getKey()).append("\": ").append(value.getValue());
                    inner = ", ";
                }
                out.append("}}");
                sep = ", ";
            }
            System.out.println(out.append("]}"));
        }
    }

    static void topic(String bootstrap, String name) throws Exception {
        try (Admin admin = Admin.create(props(bootstrap, "quota-admin"))) {
            admin.createTopics(Collections.singletonList(new NewTopic(name, 1, (short) 1))).all().get();
        }
        System.out.println("{\"topic\": \"" + name + "\"}");
    }

    static double metric(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> m : metrics.entrySet()) {
            if (m.getKey().group().equals(group) && m.getKey().name().equals(name)) {
                Object value = m.getValue().metricValue();
                return value instanceof Double && !((Double) value).isNaN() ? (Double) value : 0.0;
            }
        }
        throw new IllegalStateException("no metric " + group + " " + name);
    }

    static void produce(String bootstrap, String topic, String clientId, long bytes) throws Exception {
        Properties p = props(bootstrap, clientId);
        p.put("acks", "1");
        p.put("linger.ms", "5");
        p.put("batch.size", String.valueOf(4 * RECORD));
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        byte[] value = new byte[RECORD];
        double throttleMax = 0;
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (long sent = 0; sent < bytes; sent += RECORD) {
                producer.send(new ProducerRecord<>(topic, 0, null, value));
                throttleMax = Math.max(throttleMax, metric(producer.metrics(), "producer-metrics", "produce-throttle-time-max"));
            }
            producer.flush();
            throttleMax = Math.max(throttleMax, metric(producer.metrics(), "producer-metrics", "produce-throttle-time-max"));
        }
        long elapsed = (System.nanoTime() - start) / 1_000_000;
        System.out.println("{\"produced\": " + bytes + ", \"client\": \"" + clientId + "\", \"elapsed_ms\": " + elapsed + ", \"throttle_ms\": " + throttleMax + "}");
    }

    static void consume(String bootstrap, String topic, String clientId, long bytes) throws Exception {
        Properties p = props(bootstrap, clientId);
        p.put("max.partition.fetch.bytes", String.valueOf(8 * RECORD));
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        TopicPartition partition = new TopicPartition(topic, 0);
        double throttleMax = 0;
        long got = 0;
        long start = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(Collections.singletonList(partition));
            consumer.seekToBeginning(Collections.singletonList(partition));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < bytes && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(java.time.Duration.ofMillis(200))) {
                    got += record.value().length;
                }
                throttleMax = Math.max(throttleMax, metric(consumer.metrics(), "consumer-fetch-manager-metrics", "fetch-throttle-time-max"));
            }
        }
        long elapsed = (System.nanoTime() - start) / 1_000_000;
        System.out.println("{\"consumed\": " + got + ", \"client\": \"" + clientId + "\", \"elapsed_ms\": " + elapsed + ", \"throttle_ms\": " + throttleMax + "}");
    }
}
