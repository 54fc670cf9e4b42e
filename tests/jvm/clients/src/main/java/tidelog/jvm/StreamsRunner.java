package tidelog.jvm;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;

/** Runs a Kafka Streams application until SIGTERM: prints each state change ("STATE RUNNING")
 * and an uncaught exception ("ERROR ...", then the client shuts down) for the tests to read. */
final class StreamsRunner {
  private StreamsRunner() {}

  static void runUntilSigterm(Topology topology, Properties p) throws InterruptedException {
    KafkaStreams streams = new KafkaStreams(topology, p);
    CountDownLatch stopped = new CountDownLatch(1);
    streams.setStateListener((now, before) -> {
      System.out.println("STATE " + now);
      System.out.flush();
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.out.println("ERROR " + e);
      e.printStackTrace();
      System.out.flush();
      return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(Duration.ofSeconds(30));
      stopped.countDown();
    }));
    streams.start();
    stopped.await();
  }
}
