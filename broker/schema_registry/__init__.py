"""The Schema Registry served from the broker (``schema.registry.listeners``).

``registry.py``: the REST API's operations over ``tidelog.schema.state`` (decide, write the
``_schemas`` records, answer once the records are durable and replayed); ``store.py``: the
``_schemas`` topic (append, wait for the HW, read back and replay); ``http.py``: the HTTP
listeners (aiohttp), routes, errors as Confluent's clients parse them, TLS and basic auth;
``service.py``: the service the broker starts. Imported only when the setting is on.
"""
