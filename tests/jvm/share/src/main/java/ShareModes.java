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
 * Kafka 4.2+ share-consumer settings against a broker, in explicit acknowledgement mode.
 *
 * <p>Usage: ShareModes BOOTSTRAP TOPIC GROUP MODE N LOCK_MS
 *
 * <ul>
 *   <li>{@code renew} (KIP-1222): the record at offset 0 is held for twice LOCK_MS by
 *       acknowledging it RENEW every LOCK_MS / 2 (each renewal hands it back in the next poll),
 *       then accepted; every other record is accepted at once.
 *   <li>{@code record_limit} (KIP-1206): {@code share.acquire.mode=record_limit} with {@code
 *       max.poll.records=3}; every record is accepted.
 *   <li>{@code close}: every record is accepted and never committed: close() sends the last
 *       acknowledgements (ShareAcknowledge epoch -1) with its leave heartbeat.
 * </ul>
 *
 * <p>Prints "polls c1,c2,..." (the record count of each non-empty poll), "renewals R", "errors
 * E" (commitSync results that carried an exception), then "offset:deliveryCount" of each accepted
 * record, one per line.
 */
public final class ShareModes {
  public static void main(String[] args) throws InterruptedException {
    String mode = args[3];
    int wanted = Integer.parseInt(args[4]);
    long lockMs = Long.parseLong(args[5]);
    Properties props = new Properties();
    props.put("bootstrap.servers", args[0]);
    props.put("group.id", args[2]);
    props.put("share.acknowledgement.mode", "explicit");
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    if (mode.equals("record_limit")) {
      props.put("share.acquire.mode", "record_limit");
      props.put("max.poll.records", "3");
    }
    TreeMap<Long, Short> accepted = new TreeMap<>();
    StringBuilder polls = new StringBuilder();
    int renewals = 0;
    int errors = 0;
    long deadline = System.currentTimeMillis() + 90_000;
    try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
      consumer.subscribe(List.of(args[1]));
      while (accepted.size() < wanted && System.currentTimeMillis() < deadline) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
        if (records.count() > 0) {
          polls.append(polls.length() == 0 ? "" : ",").append(records.count());
        }
        for (ConsumerRecord<String, String> r : records) {
          short count = r.deliveryCount().orElse((short) -1);
          if (mode.equals("renew") && r.offset() == 0 && renewals < 4) {
            Thread.sleep(lockMs / 2);
            consumer.acknowledge(r, AcknowledgeType.RENEW);
            renewals++;
            continue;
          }
          consumer.acknowledge(r, AcknowledgeType.ACCEPT);
          accepted.put(r.offset(), count);
        }
        if (!mode.equals("close")) {
          errors +=
              (int) consumer.commitSync().values().stream().filter(e -> e.isPresent()).count();
        }
      }
    }
    System.out.println("polls " + polls);
    System.out.println("renewals " + renewals);
    System.out.println("errors " + errors);
    accepted.forEach((offset, count) -> System.out.println(offset + ":" + count));
  }
}
