package tidelog.jvm;

import static tidelog.jvm.Checks.expect;
import static tidelog.jvm.Checks.props;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.StringSerializer;

/** SASL login and re-authentication (KIP-368) of the Java client: a producer sends a record every
 * 200 ms for SECONDS seconds on one SASL connection, then prints its own counters
 * (successful-reauthentication-total, connection-creation-total, connection-close-total).
 * Usage: SaslSessions BOOTSTRAP MECHANISM JAAS SECONDS TOPIC */
public final class SaslSessions {
  public static void main(String[] args) throws Exception {
    String bs = args[0];
    String mechanism = args[1];
    String jaas = args[2];
    int seconds = Integer.parseInt(args[3]);
    String topic = args[4];
    Checks.run("sasl-session-" + mechanism.toLowerCase(), () -> {
      try (KafkaProducer<String, String> p = new KafkaProducer<>(props(bs,
          "security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", mechanism,
          "sasl.jaas.config", jaas, "acks", "all"),
          new StringSerializer(), new StringSerializer())) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        int sent = 0;
        while (System.nanoTime() < end) {
          p.send(new ProducerRecord<>(topic, "java-" + sent)).get(30, TimeUnit.SECONDS);
          sent++;
          Thread.sleep(200);
        }
        double reauths = total(p.metrics(), "successful-reauthentication-total");
        double created = total(p.metrics(), "connection-creation-total");
        double closed = total(p.metrics(), "connection-close-total");
        expect(sent > 0, "nothing sent");
        return "sent=" + sent + " reauths=" + (long) reauths + " created=" + (long) created
            + " closed=" + (long) closed;
      }
    });
    Checks.done();
  }

  static double total(Map<MetricName, ? extends Metric> metrics, String name) {
    double sum = 0;
    for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
      if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
        Object value = e.getValue().metricValue();
        if (value instanceof Number) sum += ((Number) value).doubleValue();
      }
    }
    return sum;
  }
}
