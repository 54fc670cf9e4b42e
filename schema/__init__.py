"""Schema Registry concepts shared by the broker's registry and the analytics decoders.

``records``: the ``_schemas`` topic's record format (Confluent's ``SchemaRegistryKey`` and value
classes, as JSON); ``state``: the registry's state, changed only by replaying those records;
``wire``: the serializers' framing (magic byte, schema id, Protobuf message indexes);
``formats``: parsing Avro, Protobuf and JSON Schema text; ``compatibility``: the compatibility
rules. Nothing here does I/O or imports the broker, the protocol layer, config or analytics
(only storage's varints; an import-linter contract), so both sides of the project can use it.
"""
