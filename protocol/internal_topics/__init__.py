"""Byte layouts of the records Kafka keeps in its internal topics (``__consumer_offsets``,
``__transaction_state``): shared by the coordinators that write them and the tools that decode
them."""
