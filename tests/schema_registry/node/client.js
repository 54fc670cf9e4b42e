// The Node Schema Registry client (@confluentinc/schemaregistry) against tidelog's registry:
// register, look up, compatibility, an incompatible change (409), Avro serialize/deserialize
// through the registry, deletes. Prints one JSON line with what it saw; exits 1 on a failure.
const sr = require("@confluentinc/schemaregistry");

async function main() {
  const url = process.argv[2];
  const client = new sr.SchemaRegistryClient({ baseURLs: [url] });
  const v1 = JSON.stringify({ type: "record", name: "Node", fields: [{ name: "a", type: "int" }] });
  const v2 = JSON.stringify({
    type: "record", name: "Node",
    fields: [{ name: "a", type: "int" }, { name: "b", type: "string" }],
  });
  const out = {};
  out.id = await client.register("node-value", { schemaType: "AVRO", schema: v1 });
  out.latest = (await client.getLatestSchemaMetadata("node-value")).version;
  out.subjects = await client.getAllSubjects();
  out.compatible = await client.testSubjectCompatibility("node-value", { schemaType: "AVRO", schema: v2 });
  try {
    await client.register("node-value", { schemaType: "AVRO", schema: v2 });
    out.conflict = null;
  } catch (e) {
    out.conflict = { status: e.status, errorCode: e.errorCode };
  }
  try {
    await client.getBySubjectAndId("", 999);
    out.missing = null;
  } catch (e) {
    out.missing = { status: e.status, errorCode: e.errorCode };
  }
  const ser = new sr.AvroSerializer(client, sr.SerdeType.VALUE, { useLatestVersion: true });
  const des = new sr.AvroDeserializer(client, sr.SerdeType.VALUE, {});
  const bytes = await ser.serialize("node", { a: 42 });
  out.magic = bytes[0];
  out.roundtrip = await des.deserialize("node", bytes);
  out.deleted = await client.deleteSubject("node-value", false);
  out.purged = await client.deleteSubject("node-value", true);
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
