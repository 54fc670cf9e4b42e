package tidelog.jvm;

import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/** A Kafka Streams application with exactly_once_v2: orders (key order id, value
 * "customer:amount") are re-keyed by customer (a repartition topic), joined with the customers
 * KTable (value region), written to st-enriched ("order:region:amount"), and summed per customer in
 * 10-second windows (a windowed state store with a changelog) into st-totals ("count:sum").
 * Runs until SIGTERM. Usage: StreamsEos BOOTSTRAP STATE_DIR [GROUP_PROTOCOL] (classic, the default,
 * or streams: KIP-1071's StreamsGroupHeartbeat). */
public final class StreamsEos {
  public static void main(String[] args) throws Exception {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, "st-app");
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.STATE_DIR_CONFIG, args[1]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
    p.put("consumer.session.timeout.ms", 10000);
    p.put("consumer.max.poll.records", 2000);
    if (args.length > 2) {
      p.put("group.protocol", args[2]);
    }

    StreamsBuilder b = new StreamsBuilder();
    KTable<String, String> customers =
        b.table("st-customers", Consumed.with(Serdes.String(), Serdes.String()));
    KStream<String, String> orders =
        b.stream("st-orders", Consumed.with(Serdes.String(), Serdes.String()));
    KStream<String, String> byCustomer = orders
        .map((orderId, v) -> KeyValue.pair(v.split(":")[0], orderId + ":" + v.split(":")[1]))
        .repartition(org.apache.kafka.streams.kstream.Repartitioned.with(Serdes.String(), Serdes.String())
            .withName("by-customer"));
    KStream<String, String> enriched = byCustomer.join(customers,
        (orderAndAmount, region) -> orderAndAmount.split(":")[0] + ":" + region + ":" + orderAndAmount.split(":")[1]);
    enriched.to("st-enriched", Produced.with(Serdes.String(), Serdes.String()));
    enriched
        .mapValues(v -> v.split(":")[2])
        .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofDays(1)))
        .aggregate(() -> "0:0",
            (customer, amount, agg) -> {
              String[] a = agg.split(":");
              return (Long.parseLong(a[0]) + 1) + ":" + (Long.parseLong(a[1]) + Long.parseLong(amount));
            },
            Materialized.with(Serdes.String(), Serdes.String()))
        .toStream((w, v) -> w.key() + "@" + w.window().start())
        .to("st-totals", Produced.with(Serdes.String(), Serdes.String()));

    StreamsRunner.runUntilSigterm(b.build(), p);
  }
}
