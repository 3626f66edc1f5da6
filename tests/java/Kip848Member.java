// One member of a consumer group of the consumer protocol (KIP-848), through Apache Kafka's Java
// client: subscribes to a topic with group.protocol=consumer, commits synchronously after each
// record, and tells the test on stdout what it does, one line each:
//   assignment <p> <p> ...      its partitions, whenever they change
//   record <partition> <offset> <committed: true|false>
//   closed                      after close(), which leaves the group
// It leaves when its stdin has a line or ends. Arguments: bootstrap servers, group id, topic.
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

public class Kip848Member {
    private static volatile boolean stopping = false;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("group.protocol", "consumer");
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("metadata.max.age.ms", "1000");
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        Thread stopper = new Thread(() -> {
            try {
                System.in.read();
            } catch (Exception e) {
                // stdin gone: stop as well
            }
            stopping = true;
        });
        stopper.setDaemon(true);
        stopper.start();
        String last = "";
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            // With a listener, the client revokes a partition in poll(), on this thread, after the
            // records of the last poll were committed; without one its background thread may release
            // a partition while this thread still commits what it read, and the next owner, starting
            // from the commit before, reads those records again.
            consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
            });
            while (!stopping) {
                var records = consumer.poll(Duration.ofMillis(200));
                TreeSet<Integer> partitions = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) {
                    partitions.add(tp.partition());
                }
                StringBuilder line = new StringBuilder("assignment");
                for (int p : partitions) {
                    line.append(' ').append(p);
                }
                if (!line.toString().equals(last)) {
                    last = line.toString();
                    System.out.println(last);
                }
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    boolean committed;
                    try {
                        consumer.commitSync(Map.of(new TopicPartition(record.topic(), record.partition()),
                                                   new OffsetAndMetadata(record.offset() + 1)));
                        committed = true;
                    } catch (Exception e) {
                        System.err.println("commit failed: " + e);
                        committed = false;
                    }
                    System.out.println("record " + record.partition() + " " + record.offset() + " " + committed);
                }
                System.out.flush();
            }
        }
        System.out.println("closed");
        System.out.flush();
    }
}
