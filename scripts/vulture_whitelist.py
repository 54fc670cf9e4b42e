"""Names vulture (the dead-code check of ./scripts/test, settings in pyproject.toml) cannot see
being used: each is called by a framework or read by value, not by name in our code.

One line per name with the reason. A name that is merely unused does not belong here: delete
its code instead.
"""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# asyncio calls a Protocol's callbacks (broker/server.py, scripts/bench's load clients).
_.connection_made  # asyncio.Protocol: the transport is ready
_.connection_lost  # asyncio.Protocol: the peer closed or the transport failed
_.data_received  # asyncio.Protocol: bytes arrived
_.pause_writing  # asyncio.Protocol: the transport's write buffer is above its high mark
_.resume_writing  # asyncio.Protocol: ... and back below its low mark

# Python calls a module's __getattr__ for a name it lacks (PEP 562: lazy imports in
# storage/__init__.py and tidelog/testing/__init__.py).
_.__getattr__  # PEP 562 module attribute hook

# PySpark's Python data source API calls these (analytics/source.py, analytics/sink.py).
_.streamReader  # pyspark DataSource: the streaming reader of spark.readStream
_.streamWriter  # pyspark DataSource: the streaming writer of writeStream
_.reportLatestOffset  # pyspark DataSourceStreamReader: progress reporting
_.batchId  # pyspark DataSourceStreamWriter.commit/abort: a parameter Spark passes

# antlr4 calls an ErrorListener's callback with this signature (schema/protobuf_text.py).
_.syntaxError  # antlr4 ErrorListener callback
_.symbol  # antlr4 ErrorListener.syntaxError: the offending token, a parameter antlr passes

# http.server calls a BaseHTTPRequestHandler's methods by name (tests' OAuth/JWKS servers).
_.do_GET  # http.server: a GET request
_.do_POST  # http.server: a POST request
_.log_message  # http.server: overridden to keep the test output quiet

# Hypothesis calls a RuleBasedStateMachine's teardown after each example (tests/kafkaref).
_.teardown  # hypothesis.stateful: runs after each example

# Enum members named after Kafka's wire codes: found by value (Enum(code)), never by name.
_.DELEGATION_TOKEN  # acls.ResourceType 6 (Kafka's DELEGATION_TOKEN resource type)
_.CREATE_TOKENS  # acls.Operation 13 (Kafka's CreateTokens operation)
_.DESCRIBE_TOKENS  # acls.Operation 14 (Kafka's DescribeTokens operation)
_.GAP  # share.partition.AcknowledgeType 0 (Kafka's GAP acknowledge type)
