package tidelog.jvm;

import static tidelog.jvm.Checks.expect;
import static tidelog.jvm.Checks.props;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Transactions with the client's defaults (transaction version 2 where the broker finalizes it):
 * commit, abort, sendOffsetsToTransaction, fencing, read_committed. Usage: Transactions BOOTSTRAP */
public final class Transactions {
  public static void main(String[] args) throws Exception {
    String bs = args[0];
    try (Admin admin = Admin.create(props(bs))) {
      admin.createTopics(List.of(new NewTopic("jt-out", 2, (short) 1),
          new NewTopic("jt-in", 2, (short) 1), new NewTopic("jt-eos", 2, (short) 1),
          new NewTopic("jt-fence", 1, (short) 1))).all().get();
      Checks.run("transaction-version", () -> {
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
        FinalizedVersionRange tv = f.finalizedFeatures().get("transaction.version");
        expect(tv != null && tv.maxVersionLevel() >= 2, "transaction.version finalized: " + tv);
        return "finalized=" + tv.maxVersionLevel();
      });
    }
    Checks.run("commit-abort-read-committed", () -> commitAbort(bs));
    Checks.run("send-offsets-to-transaction", () -> consumeTransformProduce(bs));
    Checks.run("fencing", () -> fencing(bs));
    Checks.done();
  }

  static KafkaProducer<String, String> txProducer(String bs, String id) {
    return new KafkaProducer<>(props(bs, "transactional.id", id, "linger.ms", 5),
        new StringSerializer(), new StringSerializer());
  }

  static KafkaConsumer<String, String> consumer(String bs, String group, String isolation) {
    return new KafkaConsumer<>(props(bs, "group.id", group, "auto.offset.reset", "earliest",
        "isolation.level", isolation, "enable.auto.commit", false),
        new StringDeserializer(), new StringDeserializer());
  }

  static List<String> readAll(String bs, String topic, String isolation, int atLeast) {
    List<String> out = new ArrayList<>();
    try (KafkaConsumer<String, String> c = consumer(bs, null, isolation)) {
      List<TopicPartition> tps = new ArrayList<>();
      c.partitionsFor(topic).forEach(p -> tps.add(new TopicPartition(topic, p.partition())));
      c.assign(tps);
      c.seekToBeginning(tps);
      long deadline = System.currentTimeMillis() + 15_000;
      while (System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) out.add(r.value());
        if (out.size() >= atLeast) {
          // a last poll: nothing more may come
          for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) out.add(r.value());
          break;
        }
      }
    }
    return out;
  }

  static String commitAbort(String bs) throws Exception {
    try (KafkaProducer<String, String> p = txProducer(bs, "jt-writer")) {
      p.initTransactions();
      for (int round = 0; round < 4; round++) {
        p.beginTransaction();
        for (int i = 0; i < 25; i++) {
          p.send(new ProducerRecord<>("jt-out", "k" + i, (round % 2 == 0 ? "commit-" : "abort-") + round + "-" + i));
        }
        p.flush();
        if (round % 2 == 0) p.commitTransaction(); else p.abortTransaction();
      }
    }
    List<String> committed = readAll(bs, "jt-out", "read_committed", 50);
    List<String> all = readAll(bs, "jt-out", "read_uncommitted", 100);
    expect(committed.size() == 50 && committed.stream().allMatch(v -> v.startsWith("commit-")),
        "read_committed saw " + committed.size() + " (aborted ones? " + committed.stream().filter(v -> v.startsWith("abort")).count() + ")");
    expect(all.size() == 100, "read_uncommitted saw " + all.size());
    return "committed=" + committed.size() + " uncommitted=" + all.size();
  }

  static String consumeTransformProduce(String bs) throws Exception {
    try (KafkaProducer<String, String> p = new KafkaProducer<>(props(bs),
        new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < 40; i++) p.send(new ProducerRecord<>("jt-in", "k" + i, "in-" + i));
    }
    int copied = 0;
    try (KafkaConsumer<String, String> c = consumer(bs, "jt-eos-group", "read_committed");
         KafkaProducer<String, String> p = txProducer(bs, "jt-eos-writer")) {
      p.initTransactions();
      c.subscribe(List.of("jt-in"));
      long deadline = System.currentTimeMillis() + 30_000;
      while (copied < 40 && System.currentTimeMillis() < deadline) {
        var records = c.poll(Duration.ofMillis(200));
        if (records.isEmpty()) continue;
        p.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
          p.send(new ProducerRecord<>("jt-eos", r.key(), r.value().replace("in-", "out-")));
          offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
          copied++;
        }
        p.sendOffsetsToTransaction(offsets, c.groupMetadata());
        p.commitTransaction();
      }
    }
    try (Admin admin = Admin.create(props(bs))) {
      Map<TopicPartition, OffsetAndMetadata> committed =
          admin.listConsumerGroupOffsets("jt-eos-group").partitionsToOffsetAndMetadata().get();
      long sum = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
      expect(sum == 40, "group offsets committed by the transaction: " + committed);
    }
    List<String> out = readAll(bs, "jt-eos", "read_committed", 40);
    expect(out.size() == 40 && copied == 40, "copied " + copied + ", read back " + out.size());
    return "copied=" + copied;
  }

  static String fencing(String bs) throws Exception {
    KafkaProducer<String, String> old = txProducer(bs, "jt-fenced");
    old.initTransactions();
    old.beginTransaction();
    old.send(new ProducerRecord<>("jt-fence", "k", "from-old")).get();
    try (KafkaProducer<String, String> fresh = txProducer(bs, "jt-fenced")) {
      fresh.initTransactions(); // bumps the epoch and aborts the old one's open transaction
      String how;
      try {
        old.send(new ProducerRecord<>("jt-fence", "k", "late")).get();
        old.commitTransaction();
        how = "none";
      } catch (Exception e) {
        Throwable t = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
        how = t.getClass().getSimpleName();
      }
      expect(how.equals(ProducerFencedException.class.getSimpleName())
          || how.equals(InvalidProducerEpochException.class.getSimpleName()), "old producer got " + how);
      fresh.beginTransaction();
      fresh.send(new ProducerRecord<>("jt-fence", "k", "from-new"));
      fresh.commitTransaction();
      List<String> seen = readAll(bs, "jt-fence", "read_committed", 1);
      expect(seen.equals(List.of("from-new")), "read_committed saw " + seen);
      return "old=" + how;
    } finally {
      old.close(Duration.ZERO);
    }
  }
}
