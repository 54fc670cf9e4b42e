package tidelog.jvm;

import static tidelog.jvm.Checks.props;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Every Admin method a single node can serve, one line each: "ADMIN method ok detail" or
 * "ADMIN method error ExceptionName message". The driving test compares them with the table in
 * docs/java-clients.md. Usage: AdminCoverage BOOTSTRAP */
public final class AdminCoverage {
  interface Call {
    Object run() throws Exception;
  }

  static void admin(String method, Call call) {
    String line;
    try {
      Object out = call.run();
      line = "ok" + (out == null ? "" : " " + String.valueOf(out).replace('\n', ' '));
    } catch (Throwable t) {
      Throwable c = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
      line = "error " + c.getClass().getSimpleName() + " " + String.valueOf(c.getMessage()).replace('\n', ' ');
    }
    if (line.length() > 300) line = line.substring(0, 300);
    System.out.println("ADMIN " + method + " " + line);
    System.out.flush();
  }

  static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
    return f.get(20, TimeUnit.SECONDS);
  }

  public static void main(String[] args) throws Exception {
    String bs = args[0];
    Admin a = Admin.create(props(bs, "default.api.timeout.ms", 20000, "request.timeout.ms", 10000));
    TopicPartition tp0 = new TopicPartition("ja-topic", 0);
    ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, "ja-topic");
    admin("createTopics", () -> {
      get(a.createTopics(List.of(new NewTopic("ja-topic", 2, (short) 1),
          new NewTopic("ja-gone-by-name", 1, (short) 1), new NewTopic("ja-gone-by-id", 1, (short) 1))).all());
      return null;
    });
    try (KafkaProducer<String, String> p = new KafkaProducer<>(props(bs), new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < 20; i++) p.send(new ProducerRecord<>("ja-topic", i % 2, "k", "v" + i)).get();
    }
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props(bs, "group.id", "ja-group"),
        new StringDeserializer(), new StringDeserializer())) {
      c.assign(List.of(tp0));
      c.commitSync(Map.of(tp0, new OffsetAndMetadata(5)));
    }
    admin("listTopics", () -> get(a.listTopics().names()).contains("ja-topic"));
    admin("describeTopics(names)", () -> get(a.describeTopics(List.of("ja-topic")).allTopicNames()).get("ja-topic").partitions().size());
    Uuid id = get(a.describeTopics(List.of("ja-topic")).allTopicNames()).get("ja-topic").topicId();
    admin("describeTopics(ids)", () -> get(a.describeTopics(TopicCollection.ofTopicIds(List.of(id))).allTopicIds()).get(id).name());
    admin("deleteTopics(names)", () -> { get(a.deleteTopics(List.of("ja-gone-by-name")).all()); return null; });
    admin("deleteTopics(ids)", () -> {
      Uuid gone = get(a.describeTopics(List.of("ja-gone-by-id")).allTopicNames()).get("ja-gone-by-id").topicId();
      get(a.deleteTopics(TopicCollection.ofTopicIds(List.of(gone))).all());
      return null;
    });
    admin("describeConfigs(topic)", () -> get(a.describeConfigs(List.of(topicRes)).all()).get(topicRes).get("cleanup.policy").value());
    int node = get(a.describeCluster().nodes()).iterator().next().id();
    ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(node));
    admin("describeConfigs(broker)", () -> get(a.describeConfigs(List.of(brokerRes)).all()).get(brokerRes).entries().size() > 10);
    admin("incrementalAlterConfigs", () -> {
      get(a.incrementalAlterConfigs(Map.of(topicRes, List.of(new AlterConfigOp(
          new ConfigEntry("retention.ms", "86400000"), AlterConfigOp.OpType.SET)))).all());
      return get(a.describeConfigs(List.of(topicRes)).all()).get(topicRes).get("retention.ms").value();
    });
    admin("createPartitions", () -> { get(a.createPartitions(Map.of("ja-topic", NewPartitions.increaseTo(3))).all()); return null; });
    admin("deleteRecords", () -> get(a.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(2))).all()));
    admin("listOffsets(earliest)", () -> get(a.listOffsets(Map.of(tp0, OffsetSpec.earliest())).all()).get(tp0).offset());
    admin("listOffsets(latest)", () -> get(a.listOffsets(Map.of(tp0, OffsetSpec.latest())).all()).get(tp0).offset());
    admin("listOffsets(maxTimestamp)", () -> get(a.listOffsets(Map.of(tp0, OffsetSpec.maxTimestamp())).all()).get(tp0).offset());
    admin("listOffsets(forTimestamp)", () -> get(a.listOffsets(Map.of(tp0, OffsetSpec.forTimestamp(0))).all()).get(tp0).offset());
    admin("listOffsets(earliestLocal)", () -> get(a.listOffsets(Map.of(tp0, OffsetSpec.earliestLocal())).all()).get(tp0).offset());
    admin("listOffsets(latestTiered)", () -> get(a.listOffsets(Map.of(tp0, OffsetSpec.latestTiered())).all()).get(tp0).offset());
    admin("describeLogDirs", () -> get(a.describeLogDirs(List.of(node)).allDescriptions()).get(node).size());
    admin("describeReplicaLogDirs", () -> get(a.describeReplicaLogDirs(List.of(new TopicPartitionReplica("ja-topic", 0, node))).all()).size());
    admin("describeCluster", () -> get(a.describeCluster().nodes()).size() + " nodes, controller " + get(a.describeCluster().controller()).id());
    admin("describeFeatures", () -> get(a.describeFeatures().featureMetadata()).finalizedFeatures().keySet());
    admin("updateFeatures", () -> { get(a.updateFeatures(Map.of("transaction.version", new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)), new UpdateFeaturesOptions()).all()); return null; });
    admin("describeMetadataQuorum", () -> get(a.describeMetadataQuorum().quorumInfo()).leaderId());
    admin("listGroups", () -> get(a.listGroups().all()).stream().anyMatch(g -> g.groupId().equals("ja-group")));
    admin("listConsumerGroups", () -> get(a.listConsumerGroups().all()).stream().anyMatch(g -> g.groupId().equals("ja-group")));
    admin("describeConsumerGroups", () -> get(a.describeConsumerGroups(List.of("ja-group")).all()).get("ja-group").type());
    admin("describeClassicGroups", () -> get(a.describeClassicGroups(List.of("ja-group")).all()).get("ja-group").state());
    admin("describeShareGroups", () -> get(a.describeShareGroups(List.of("ja-share")).all()).get("ja-share").groupState());
    admin("describeStreamsGroups", () -> get(a.describeStreamsGroups(List.of("ja-streams")).all()).get("ja-streams").groupState());
    admin("listConsumerGroupOffsets", () -> get(a.listConsumerGroupOffsets("ja-group").partitionsToOffsetAndMetadata()).get(tp0).offset());
    admin("alterConsumerGroupOffsets", () -> { get(a.alterConsumerGroupOffsets("ja-group", Map.of(tp0, new OffsetAndMetadata(7))).all()); return null; });
    admin("deleteConsumerGroupOffsets", () -> { get(a.deleteConsumerGroupOffsets("ja-group", Set.of(tp0)).all()); return null; });
    admin("listShareGroupOffsets", () -> get(a.listShareGroupOffsets(Map.of("ja-share", new ListShareGroupOffsetsSpec())).all()).size());
    admin("removeMembersFromConsumerGroup", () -> { get(a.removeMembersFromConsumerGroup("ja-group", new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove("ja-nobody")))).all()); return null; });
    admin("deleteConsumerGroups", () -> { get(a.deleteConsumerGroups(List.of("ja-group")).all()); return null; });
    try (KafkaProducer<String, String> p = new KafkaProducer<>(props(bs, "transactional.id", "ja-tx"), new StringSerializer(), new StringSerializer())) {
      p.initTransactions();
      p.beginTransaction();
      p.send(new ProducerRecord<>("ja-topic", 1, "k", "in-txn")).get();
      admin("listTransactions", () -> get(a.listTransactions().all()).stream().anyMatch(t -> t.transactionalId().equals("ja-tx")));
      admin("describeTransactions", () -> get(a.describeTransactions(List.of("ja-tx")).all()).get("ja-tx").state());
      TopicPartition tp1 = new TopicPartition("ja-topic", 1);
      admin("describeProducers", () -> get(a.describeProducers(List.of(tp1)).all()).get(tp1).activeProducers().size());
      admin("abortTransaction", () -> {
        ProducerState st = get(a.describeProducers(List.of(tp1)).all()).get(tp1).activeProducers().stream()
            .filter(x -> x.currentTransactionStartOffset().isPresent()).findFirst().orElseThrow();
        get(a.abortTransaction(new AbortTransactionSpec(tp1, st.producerId(), (short) st.producerEpoch(), st.coordinatorEpoch().orElse(-1))).all());
        return null;
      });
      admin("fenceProducers", () -> { get(a.fenceProducers(List.of("ja-tx")).all()); return null; });
    }
    AclBinding acl = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "ja-topic", PatternType.LITERAL),
        new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
    admin("createAcls", () -> { get(a.createAcls(List.of(acl)).all()); return null; });
    admin("describeAcls", () -> get(a.describeAcls(AclBindingFilter.ANY).values()).size());
    admin("deleteAcls", () -> get(a.deleteAcls(List.of(acl.toFilter())).all()).size());
    admin("alterUserScramCredentials", () -> { get(a.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("ja-user",
        new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "secret"))).all()); return null; });
    admin("describeUserScramCredentials", () -> get(a.describeUserScramCredentials(List.of("ja-user")).all()).get("ja-user").credentialInfos().size());
    admin("describeClientQuotas", () -> get(a.describeClientQuotas(ClientQuotaFilter.all()).entities()).size());
    admin("alterClientQuotas", () -> { get(a.alterClientQuotas(List.of(new ClientQuotaAlteration(new ClientQuotaEntity(Map.of("client-id", "ja")),
        List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0))))).all()); return null; });
    admin("electLeaders", () -> get(a.electLeaders(ElectionType.PREFERRED, Set.of(tp0)).partitions()).size());
    admin("alterPartitionReassignments", () -> { get(a.alterPartitionReassignments(Map.of(tp0, java.util.Optional.empty())).all()); return null; });
    admin("listPartitionReassignments", () -> get(a.listPartitionReassignments().reassignments()).size());
    admin("alterReplicaLogDirs", () -> { get(a.alterReplicaLogDirs(Map.of(new TopicPartitionReplica("ja-topic", 0, node), "/nonexistent")).all()); return null; });
    admin("createDelegationToken", () -> get(a.createDelegationToken().delegationToken()).tokenInfo().tokenId());
    admin("describeDelegationToken", () -> get(a.describeDelegationToken().delegationTokens()).size());
    admin("listConfigResources", () -> get(a.listConfigResources().all()).size());
    admin("unregisterBroker", () -> { get(a.unregisterBroker(1).all()); return null; });
    admin("addRaftVoter", () -> { get(a.addRaftVoter(1, Uuid.randomUuid(), Set.of(new RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 1))).all()); return null; });
    admin("removeRaftVoter", () -> { get(a.removeRaftVoter(1, Uuid.randomUuid()).all()); return null; });
    a.close();
    System.out.println("DONE failures=0");
  }
}
