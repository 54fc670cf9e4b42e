package tidelog.jvm;

import static tidelog.jvm.Checks.props;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Exactly-once consume-transform-produce with the consumer group protocol of KIP-848
 * (group.protocol=consumer) and transactions (sendOffsetsToTransaction), while the driving test
 * restarts the broker. Usage: EosConsumerProtocol BOOTSTRAP PREFIX RECORDS WORKERS DEADLINE_S
 *
 * <p>Makes PREFIX-in and PREFIX-out (3 partitions each), produces RECORDS keyed records 0..N-1
 * to PREFIX-in (idempotent), prints "INPUT-DONE", then WORKERS threads, each a consumer in group
 * PREFIX-g and a transactional producer, copy PREFIX-in to PREFIX-out: poll, send, send the
 * offsets to the transaction, commit. A failed transaction closes both clients and starts new
 * ones (which resume from the group's committed offsets and fence the old producer), as an
 * application does. Prints "PROGRESS committed=n" after each commit, "FAILURE ..." for each
 * failed transaction, then "RESULT ok" once RECORDS records were committed (or "RESULT FAIL"
 * at the deadline) and "DONE". The test checks PREFIX-out itself (read_committed, another
 * client): every key exactly once. */
public final class EosConsumerProtocol {
  private static final AtomicLong committed = new AtomicLong();
  private static final AtomicLong failures = new AtomicLong();
  private static final AtomicBoolean stop = new AtomicBoolean();

  public static void main(String[] args) throws Exception {
    String bs = args[0];
    String prefix = args[1];
    int records = Integer.parseInt(args[2]);
    int workers = Integer.parseInt(args[3]);
    long deadline = System.nanoTime() + Long.parseLong(args[4]) * 1_000_000_000L;
    String in = prefix + "-in";
    String out = prefix + "-out";
    try (Admin admin = Admin.create(props(bs))) {
      admin.createTopics(List.of(new NewTopic(in, 3, (short) 1), new NewTopic(out, 3, (short) 1)))
          .all().get();
    }
    try (KafkaProducer<String, String> p = new KafkaProducer<>(
        props(bs, "enable.idempotence", true, "acks", "all", "linger.ms", 5),
        new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < records; i++) p.send(new ProducerRecord<>(in, "" + i, "v" + i));
      p.flush();
    }
    say("INPUT-DONE " + records);
    List<Thread> threads = new ArrayList<>();
    for (int w = 0; w < workers; w++) {
      String txnId = prefix + "-t" + w;
      Thread t = new Thread(() -> work(bs, prefix, in, out, txnId, records), "worker-" + w);
      t.start();
      threads.add(t);
    }
    while (committed.get() < records && System.nanoTime() < deadline) Thread.sleep(100);
    stop.set(true);
    for (Thread t : threads) t.join(120_000);
    long got = committed.get();
    if (got == records) {
      say("RESULT ok committed=" + got + " failures=" + failures.get());
    } else {
      say("RESULT FAIL committed " + got + " of " + records + " (failed transactions "
          + failures.get() + ")");
    }
    say("DONE");
    System.exit(0);
  }

  static synchronized void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  static void work(String bs, String prefix, String in, String out, String txnId, int records) {
    while (!stop.get()) {
      KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props(bs,
          "group.id", prefix + "-g", "group.protocol", "consumer",
          "auto.offset.reset", "earliest", "isolation.level", "read_committed",
          "enable.auto.commit", false, "max.poll.records", 200),
          new StringDeserializer(), new StringDeserializer());
      KafkaProducer<String, String> producer = new KafkaProducer<>(props(bs,
          "transactional.id", txnId, "linger.ms", 5, "transaction.timeout.ms", 60000,
          "delivery.timeout.ms", 120000, "max.block.ms", 120000),
          new StringSerializer(), new StringSerializer());
      try {
        producer.initTransactions();
        consumer.subscribe(List.of(in));
        while (!stop.get()) {
          ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
          if (batch.isEmpty()) continue;
          producer.beginTransaction();
          Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
          for (ConsumerRecord<String, String> r : batch) {
            producer.send(new ProducerRecord<>(out, r.key(), r.value()));
            offsets.put(new TopicPartition(r.topic(), r.partition()),
                new OffsetAndMetadata(r.offset() + 1));
          }
          producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
          producer.commitTransaction();
          say("PROGRESS committed=" + committed.addAndGet(batch.count()));
        }
      } catch (Exception e) {
        failures.incrementAndGet();
        say("FAILURE " + txnId + " " + e.getClass().getSimpleName() + ": "
            + String.valueOf(e.getMessage()).replace('\n', ' '));
      } finally {
        try {
          producer.close(Duration.ofSeconds(5));
        } catch (Exception ignored) {
          // closing after a failure: nothing more to learn
        }
        try {
          consumer.close(Duration.ofSeconds(5));
        } catch (Exception ignored) {
          // as above
        }
      }
    }
  }
}
