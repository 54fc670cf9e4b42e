"""The transaction coordinator (``__transaction_state``, markers, the state machine).

The package itself holds only what ApiVersions needs before the coordinator loads (the
``transaction.version`` feature); the coordinator's modules are imported after the first answer.
"""

__all__ = ("TRANSACTION_VERSION", "TRANSACTION_VERSION_FEATURE")

#: The feature ApiVersions finalizes (Kafka's TransactionVersion) and the level served: 2 =
#: KIP-890 part 2 (epoch bump per transaction, implicit adds by Produce v12 / TxnOffsetCommit
#: v5). Clients of level 0/1 (every client before Kafka 4's Java client) keep working as before.
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION = 2
