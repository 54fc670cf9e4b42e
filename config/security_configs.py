"""The security settings of a broker (Kafka's ``BrokerSecurityConfigs``, ``SslConfigs``,
``SaslConfigs``): TLS, SASL, SCRAM, ACLs (``broker/security/``).

Each ``ssl.*`` and ``sasl.*`` setting may also be given per listener as
``listener.name.<listener>.<setting>`` (the listener name in lower case), as in Kafka
(``config/definitions.py``: ``listener_setting_base``).
"""

from __future__ import annotations

from tidelog.config.config_def import ConfigDef, broker_def

__all__ = ("SECURITY_CONFIGS",)

SECURITY_CONFIGS: tuple[ConfigDef, ...] = (
    broker_def(
        "ssl.keystore.type",
        "string",
        "JKS",
        "Format of the key store: PEM (JKS and PKCS12 are refused at start-up; convert them).",
    ),
    broker_def(
        "ssl.keystore.location",
        "string",
        None,
        "PEM file holding the private key (plain or encrypted PKCS#8) and the certificate chain.",
        importance="high",
    ),
    broker_def(
        "ssl.keystore.password",
        "password",
        None,
        "Password of the key store file; not read (PEM stores only: the key's own password is "
        "ssl.key.password).",
    ),
    broker_def("ssl.key.password", "password", None, "Password of an encrypted private key."),
    broker_def("ssl.keystore.key", "password", None, "The private key inline (PEM)."),
    broker_def(
        "ssl.keystore.certificate.chain",
        "password",
        None,
        "The certificate chain inline (PEM), with ssl.keystore.key.",
    ),
    broker_def("ssl.truststore.type", "string", "JKS", "Format of the trust store: PEM."),
    broker_def(
        "ssl.truststore.location",
        "string",
        None,
        "PEM file of the CA certificates trusted for client certificates.",
    ),
    broker_def(
        "ssl.truststore.password",
        "password",
        None,
        "Password of the trust store; not read (PEM trust stores have none).",
    ),
    broker_def(
        "ssl.truststore.certificates",
        "password",
        None,
        "The trusted CA certificates inline (PEM).",
    ),
    broker_def(
        "ssl.client.auth",
        "string",
        "none",
        "Mutual TLS: required, requested (checked when sent) or none.",
        choices=("required", "requested", "none"),
    ),
    broker_def(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "Rules mapping a client certificate's subject DN to a principal name "
        "(RULE:pattern/replacement/[LU], ..., DEFAULT).",
    ),
    broker_def(
        "ssl.enabled.protocols",
        "list",
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted.",
        choices=("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1"),
    ),
    broker_def(
        "ssl.protocol",
        "string",
        "TLSv1.3",
        "The TLS protocol family; not read (ssl.enabled.protocols decides the versions).",
    ),
    broker_def(
        "ssl.cipher.suites",
        "list",
        [],
        "Cipher suites allowed (OpenSSL or IANA names); empty: the library's defaults.",
    ),
    broker_def(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "Host name check of the peer's certificate; not read (a client setting: the broker has no "
        "outgoing TLS connections).",
    ),
    broker_def(
        "sasl.enabled.mechanisms",
        "list",
        ["GSSAPI"],
        "SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
        "OAUTHBEARER.",
        importance="high",
    ),
    broker_def(
        "sasl.jaas.config",
        "password",
        None,
        "JAAS login configuration; per listener and mechanism as "
        "listener.name.<listener>.<mechanism>.sasl.jaas.config.",
    ),
    broker_def(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "Largest SASL token accepted before authentication; larger closes the connection.",
        min_value=1,
    ),
    broker_def(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "Delay before closing a connection whose authentication failed.",
        min_value=0,
    ),
    broker_def(
        "connections.max.reauth.ms",
        "long",
        0,
        "Longest SASL session (KIP-368): SaslAuthenticate v1+ tells the client, which must "
        "re-authenticate within it; a connection that sends any other request after its session "
        "expired is closed. 0: no limit (an OAUTHBEARER session still ends when its token "
        "expires). Per listener and mechanism as "
        "listener.name.<listener>.<mechanism>.connections.max.reauth.ms.",
        min_value=0,
    ),
    broker_def(
        "sasl.server.callback.handler.class",
        "string",
        None,
        "Validator of OAUTHBEARER tokens, per listener and mechanism as "
        "listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class: "
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler "
        "checks signed JWTs against sasl.oauthbearer.jwks.endpoint.url; unset: the unsecured "
        "validator (unsigned tokens, for development; options unsecuredValidator* in the JAAS "
        "configuration).",
    ),
    broker_def(
        "sasl.oauthbearer.jwt.validator.class",
        "string",
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
        "How OAuthBearerValidatorCallbackHandler checks a JWT: Kafka's DefaultJwtValidator or "
        "BrokerJwtValidator (the same checks here: signature from the JWKS, then the claims).",
    ),
    broker_def(
        "sasl.oauthbearer.jwks.endpoint.url",
        "string",
        None,
        "Where the OAUTHBEARER validator gets the keys of its JWKS: an https:// (or http://) URL, "
        "refreshed every sasl.oauthbearer.jwks.endpoint.refresh.ms and when a token names an "
        "unknown key id, or a file:// URL read at start-up.",
    ),
    broker_def(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "long",
        3600000,
        "Wait between two fetches of the JWKS from its URL.",
        min_value=0,
    ),
    broker_def(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "long",
        100,
        "First wait before retrying a failed JWKS fetch (doubled each attempt).",
        min_value=0,
    ),
    broker_def(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "long",
        10000,
        "Longest wait between attempts to fetch the JWKS.",
        min_value=0,
    ),
    broker_def(
        "sasl.oauthbearer.expected.audience",
        "list",
        [],
        "Audiences a token's aud claim must contain one of; empty: a token with an aud claim "
        "is refused (as Kafka's jose4j does).",
    ),
    broker_def(
        "sasl.oauthbearer.expected.issuer",
        "string",
        None,
        "The iss claim a token must have; unset: not checked.",
    ),
    broker_def(
        "sasl.oauthbearer.clock.skew.seconds",
        "int",
        30,
        "Clock difference allowed when checking a token's exp, iat and nbf claims.",
        min_value=0,
    ),
    broker_def(
        "sasl.oauthbearer.scope.claim.name",
        "string",
        "scope",
        "Claim holding a token's scopes.",
    ),
    broker_def(
        "sasl.oauthbearer.sub.claim.name",
        "string",
        "sub",
        "Claim holding a token's subject: the principal is User:<subject>.",
    ),
    broker_def(
        "authorizer.class.name",
        "string",
        "",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACL authorization on.",
        importance="high",
    ),
    broker_def(
        "super.users",
        "string",
        None,
        "Principals allowed everything, separated by ';' (User:admin;User:CN=broker).",
        importance="high",
    ),
    broker_def(
        "allow.everyone.if.no.acl.found",
        "boolean",
        False,
        "Allow an action on a resource no ACL matches (false: deny).",
    ),
)
