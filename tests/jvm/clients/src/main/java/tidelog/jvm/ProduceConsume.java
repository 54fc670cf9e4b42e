package tidelog.jvm;

import static tidelog.jvm.Checks.expect;
import static tidelog.jvm.Checks.props;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** The idempotent producer with every codec; consumers in classic and consumer (KIP-848) groups.
 * Usage: ProduceConsume BOOTSTRAP */
public final class ProduceConsume {
  static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
  static final int N = 600;

  public static void main(String[] args) throws Exception {
    String bs = args[0];
    try (Admin admin = Admin.create(props(bs))) {
      List<NewTopic> topics = new ArrayList<>();
      for (String c : CODECS) topics.add(new NewTopic("j-codec-" + c, 3, (short) 1));
      topics.add(new NewTopic("j-classic", 4, (short) 1));
      topics.add(new NewTopic("j-kip848", 4, (short) 1));
      admin.createTopics(topics).all().get();
    }
    for (String codec : CODECS) {
      Checks.run("produce-consume-" + codec, () -> roundTrip(bs, codec));
    }
    for (String protocol : new String[] {"classic", "consumer"}) {
      String topic = protocol.equals("classic") ? "j-classic" : "j-kip848";
      Checks.run("group-" + protocol, () -> twoMemberGroup(bs, topic, protocol));
    }
    Checks.done();
  }

  static String roundTrip(String bs, String codec) throws Exception {
    String topic = "j-codec-" + codec;
    Map<String, String> sent = new HashMap<>();
    try (KafkaProducer<String, String> p = new KafkaProducer<>(props(bs,
        "enable.idempotence", true, "acks", "all", "compression.type", codec, "linger.ms", 5),
        new StringSerializer(), new StringSerializer())) {
      List<Future<RecordMetadata>> acks = new ArrayList<>();
      for (int i = 0; i < N; i++) {
        String v = "value-" + i + "-" + "z".repeat(i % 97);
        sent.put("k" + i, v);
        ProducerRecord<String, String> r = new ProducerRecord<>(topic, "k" + i, v);
        r.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
        acks.add(p.send(r));
      }
      for (Future<RecordMetadata> f : acks) f.get();
    }
    Map<String, String> got = new HashMap<>();
    Map<Integer, Long> next = new HashMap<>();
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props(bs, "group.id", "g-" + topic,
        "auto.offset.reset", "earliest", "group.protocol", "classic"),
        new StringDeserializer(), new StringDeserializer())) {
      c.subscribe(List.of(topic));
      long deadline = System.currentTimeMillis() + 30_000;
      while (got.size() < N && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
          long want = next.getOrDefault(r.partition(), 0L);
          expect(r.offset() == want, "offset " + r.offset() + " != " + want + " in " + r.partition());
          next.put(r.partition(), r.offset() + 1);
          Header h = r.headers().lastHeader("i");
          expect(h != null && ("k" + new String(h.value(), StandardCharsets.UTF_8)).equals(r.key()),
              "header of " + r.key());
          got.put(r.key(), r.value());
        }
      }
      c.commitSync();
    }
    expect(got.equals(sent), "read " + got.size() + " of " + N + " or values differ");
    return "records=" + got.size();
  }

  static String twoMemberGroup(String bs, String topic, String protocol) throws Exception {
    String group = "g-two-" + protocol;
    Properties1 cfg = new Properties1(bs, group, protocol);
    Set<String> seen = Collections.synchronizedSet(new HashSet<>());
    List<Set<TopicPartition>> owned = new ArrayList<>();
    try (KafkaConsumer<String, String> a = cfg.consumer(); KafkaConsumer<String, String> b = cfg.consumer()) {
      a.subscribe(List.of(topic));
      b.subscribe(List.of(topic));
      // the group settles first (the topic is empty), then the records come: none is read twice
      long deadline = System.currentTimeMillis() + 60_000;
      while (System.currentTimeMillis() < deadline
          && (a.assignment().isEmpty() || b.assignment().isEmpty()
              || a.assignment().size() + b.assignment().size() != 4)) {
        for (KafkaConsumer<String, String> c : List.of(a, b)) c.poll(Duration.ofMillis(100));
      }
      try (KafkaProducer<String, String> p = new KafkaProducer<>(props(bs, "linger.ms", 5),
          new StringSerializer(), new StringSerializer())) {
        for (int i = 0; i < N; i++) p.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
        p.flush();
      }
      while (System.currentTimeMillis() < deadline && seen.size() < N) {
        for (KafkaConsumer<String, String> c : List.of(a, b)) {
          for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
            expect(seen.add(r.key()), "duplicate " + r.key());
          }
        }
      }
      owned.add(new HashSet<>(a.assignment()));
      owned.add(new HashSet<>(b.assignment()));
      a.commitSync();
      b.commitSync();
    }
    expect(seen.size() == N, "read " + seen.size() + " of " + N);
    expect(!owned.get(0).isEmpty() && !owned.get(1).isEmpty(), "both members own partitions: " + owned);
    Set<TopicPartition> both = new HashSet<>(owned.get(0));
    both.retainAll(owned.get(1));
    expect(both.isEmpty() && owned.get(0).size() + owned.get(1).size() == 4, "split " + owned);
    // a later member of the group resumes at the committed offsets: nothing left to read
    try (KafkaConsumer<String, String> c = cfg.consumer()) {
      c.subscribe(List.of(topic));
      int more = 0;
      long deadline = System.currentTimeMillis() + 8_000;
      while (System.currentTimeMillis() < deadline) more += c.poll(Duration.ofMillis(200)).count();
      Map<TopicPartition, OffsetAndMetadata> committed = c.committed(owned.get(0));
      long sum = 0;
      for (OffsetAndMetadata o : committed.values()) sum += o == null ? 0 : o.offset();
      expect(more == 0, "re-read " + more + " after commit");
      expect(sum > 0, "committed offsets " + committed);
    }
    return "split=" + owned.get(0).size() + "+" + owned.get(1).size();
  }

  /** Consumer settings of one group. */
  record Properties1(String bs, String group, String protocol) {
    KafkaConsumer<String, String> consumer() {
      java.util.Properties p = props(bs, "group.id", group, "auto.offset.reset", "earliest",
          "group.protocol", protocol, "enable.auto.commit", false);
      if (protocol.equals("classic")) p.put("session.timeout.ms", "10000");
      return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }
  }
}
