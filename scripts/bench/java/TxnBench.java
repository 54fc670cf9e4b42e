import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client's half of scripts/bench/transactions.py: one producer, partition 0 of TOPIC,
 * records of SIZE bytes. MODE "idempotent" sends RECORDS records and flushes; "transactional"
 * sends them PER_TXN per transaction (beginTransaction, send x PER_TXN, commitTransaction), with
 * the client's defaults, so transaction version 2 (Produce v12 adds the partition, EndTxn v5)
 * wherever the broker finalizes it. A warm-up of WARMUP records (untimed) goes first.
 * linger.ms 5 and batch.size 1000000 as librdkafka's settings in transactions.py.
 * Prints one line: "records_per_s=<r> transactions_per_s=<t>".
 *
 * Usage: TxnBench BOOTSTRAP TOPIC MODE RECORDS SIZE PER_TXN WARMUP
 */
public final class TxnBench {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    boolean transactional = args[2].equals("transactional");
    int records = Integer.parseInt(args[3]);
    byte[] value = new byte[Integer.parseInt(args[4])];
    java.util.Arrays.fill(value, (byte) 'v');
    int perTxn = Integer.parseInt(args[5]);
    int warmup = Integer.parseInt(args[6]);
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    props.put("linger.ms", "5");
    // librdkafka's default batch size (the Java client's is 16 KiB): both clients then send a
    // transaction's 100 records in one batch, so the figures compare protocols, not batching.
    props.put("batch.size", "1000000");
    props.put("enable.idempotence", "true");
    props.put("acks", "all");
    if (transactional) {
      props.put("transactional.id", "java-bench-" + topic);
    }
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
      if (transactional) {
        producer.initTransactions();
      }
      run(producer, topic, transactional, warmup, value, perTxn);
      long start = System.nanoTime();
      run(producer, topic, transactional, records, value, perTxn);
      double seconds = (System.nanoTime() - start) / 1e9;
      System.out.printf(
          "records_per_s=%.0f transactions_per_s=%.1f%n",
          records / seconds, transactional ? records / perTxn / seconds : 0.0);
    }
  }

  static void run(KafkaProducer<byte[], byte[]> producer, String topic, boolean transactional,
      int records, byte[] value, int perTxn) {
    if (!transactional) {
      for (int i = 0; i < records; i++) {
        producer.send(new ProducerRecord<>(topic, 0, null, value));
      }
      producer.flush();
      return;
    }
    for (int done = 0; done < records; done += perTxn) {
      producer.beginTransaction();
      for (int i = 0; i < perTxn; i++) {
        producer.send(new ProducerRecord<>(topic, 0, null, value));
      }
      producer.commitTransaction();
    }
  }
}
