"""Security: TLS listeners, SASL authentication, principals and ACL authorization.

- ``listener.py``: what each listener asks of its connections (protocol, TLS context, SASL
  mechanisms), built at start-up from ``listener.name.<listener>.*`` and broker-wide settings;
- ``tls.py``: the server ``ssl.SSLContext`` (PEM key store and trust store);
- ``principal.py``: principals and ``ssl.principal.mapping.rules``;
- ``sasl.py``: the per-connection authentication state machine and PLAIN;
- ``scram.py``: SCRAM-SHA-256/512 (RFC 5802/7677) and the credential store;
- ``acls.py``: Kafka's ACL model (resource, pattern, operation, permission) and filters;
- ``authorizer.py``: the one ``Authorizer`` the handlers ask, and its durable ACL store;
- ``access.py``: the handlers' helpers (``allowed``) and the denial log.
"""
