package tidelog.jvm;

import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.LogAndContinueExceptionHandler;
import org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/** Kafka Streams 4.2+'s dead-letter queue (KIP-1034) with exactly_once_v2: dlq-in (key bytes,
 * value a 4-byte Integer) is copied to dlq-out; a value that is not 4 bytes fails the
 * IntegerDeserializer (LogAndContinueExceptionHandler) and a negative value makes the processor
 * throw (LogAndContinueProcessingExceptionHandler); both handlers send the source record to
 * dlq-dead (errors.dead.letter.queue.topic.name) with the __streams.errors.* headers.
 * Runs until SIGTERM. Usage: StreamsDlq BOOTSTRAP STATE_DIR */
public final class StreamsDlq {
  public static void main(String[] args) throws Exception {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, "dlq-app");
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.STATE_DIR_CONFIG, args[1]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
    p.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG,
        LogAndContinueExceptionHandler.class);
    p.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG,
        LogAndContinueProcessingExceptionHandler.class);
    p.put(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, "dlq-dead");
    p.put("consumer.session.timeout.ms", 10000);

    StreamsBuilder b = new StreamsBuilder();
    b.stream("dlq-in", Consumed.with(Serdes.ByteArray(), Serdes.Integer()))
        .mapValues(v -> {
          if (v < 0) {
            throw new IllegalArgumentException("negative value " + v);
          }
          return v;
        })
        .to("dlq-out", Produced.with(Serdes.ByteArray(), Serdes.Integer()));

    StreamsRunner.runUntilSigterm(b.build(), p);
  }
}
