import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads N records of a topic with a KafkaShareConsumer in explicit acknowledgement mode: the
 * record at offset 0 is released once (it must come back with delivery count 2), every other
 * delivery is accepted. Prints "offset:deliveryCount" of each accepted record, one per line.
 *
 * <p>Usage: ShareSmoke BOOTSTRAP TOPIC GROUP N
 */
public final class ShareSmoke {
  public static void main(String[] args) {
    Properties props = new Properties();
    props.put("bootstrap.servers", args[0]);
    props.put("group.id", args[2]);
    props.put("share.acknowledgement.mode", "explicit");
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    int wanted = Integer.parseInt(args[3]);
    TreeMap<Long, Short> accepted = new TreeMap<>();
    long deadline = System.currentTimeMillis() + 60_000;
    try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
      consumer.subscribe(List.of(args[1]));
      while (accepted.size() < wanted && System.currentTimeMillis() < deadline) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
        for (ConsumerRecord<String, String> r : records) {
          short count = r.deliveryCount().orElse((short) -1);
          if (r.offset() == 0 && count == 1) {
            consumer.acknowledge(r, AcknowledgeType.RELEASE);
          } else {
            consumer.acknowledge(r, AcknowledgeType.ACCEPT);
            accepted.put(r.offset(), count);
          }
        }
        consumer.commitSync();
      }
    }
    accepted.forEach((offset, count) -> System.out.println(offset + ":" + count));
  }
}
