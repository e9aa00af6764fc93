"""A client's security configs, Kafka Java client names (as mirror configs carry them).

`security.protocol` PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL; TLS trust from
`ssl.truststore.type=PEM` with `ssl.truststore.location` (a PEM file) or
`ssl.truststore.certificates` (inline PEM), librdkafka's `ssl.ca.location` also accepted;
the system CAs otherwise. `ssl.endpoint.identification.algorithm` "https" (default)
verifies the broker's host name, "" does not. A client certificate (for
`ssl.client.auth=required` brokers): `ssl.keystore.type=PEM` with `ssl.keystore.location`
(key and certificate in one PEM) or inline `ssl.keystore.certificate.chain` +
`ssl.keystore.key`, `ssl.key.password` for an encrypted key. SASL: `sasl.mechanism` (GSSAPI,
Kafka's default, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and `sasl.jaas.config`: PLAIN and SCRAM
take the login module's `username` and `password`; GSSAPI (Kerberos) takes
`com.sun.security.auth.module.Krb5LoginModule` with `useKeyTab=true keyTab=... principal=...`
or `useTicketCache=true` (optionally `ticketCache=...`, else the default cache), and
`sasl.kerberos.service.name`, the first part of the brokers' principals. OAUTHBEARER takes
`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule`: with
`sasl.oauthbearer.token.endpoint.url`, a token of the OAuth client credentials grant
(`clientId`, `clientSecret`, optional `scope` options, or Kafka 4.1's
`sasl.oauthbearer.client.credentials.client.id` / `.client.secret` and
`sasl.oauthbearer.scope`); without it, Kafka's unsecured token of the `unsecuredLogin*`
options. Keys this client does not know are ignored, as
Kafka's clients only warn about them; values it cannot honour are a `SecurityConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kmirror.security.gssapi import GSSAPI, KRB5_LOGIN_MODULE
from kmirror.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfig,
    JaasConfigError,
    parse_jaas_config,
)
from kmirror.security.oauthbearer import OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE
from kmirror.security.plain import PLAIN
from kmirror.security.scram import SCRAM_MECHANISM_NAMES

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CLIENT_SASL_MECHANISMS = (GSSAPI, OAUTHBEARER, PLAIN, *SCRAM_MECHANISM_NAMES)
_LOGIN_MODULES = {GSSAPI: KRB5_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE, PLAIN: PLAIN_LOGIN_MODULE,
                  **{m: SCRAM_LOGIN_MODULE for m in SCRAM_MECHANISM_NAMES}}

# The keys `client_security` reads; a tool that refuses unknown client properties accepts these.
CLIENT_SECURITY_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.ca.location", "ssl.endpoint.identification.algorithm",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.key.password", "ssl.protocol", "ssl.enabled.protocols", "sasl.kerberos.service.name",
    "sasl.login.callback.handler.class", "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.credentials.client.secret",
})


class SecurityConfigError(ValueError):
    """A security config the client cannot honour; `str()` names the key and why."""


@dataclass(frozen=True, slots=True)
class TlsClientSettings:
    ca_location: str | None = None
    ca_pem: str | None = None
    check_hostname: bool = True
    keystore_location: str | None = None
    certificate_chain_pem: str | None = None
    key_pem: str | None = None
    key_password: str | None = None


@dataclass(frozen=True, slots=True)
class KerberosClientSettings:
    service_name: str
    principal: str | None = None  # with keytab: log in from the keytab
    keytab: str | None = None
    ticket_cache: str | None = None  # None with no keytab: the default cache (KRB5CCNAME)


@dataclass(frozen=True, slots=True)
class OAuthClientSettings:
    token_endpoint: str | None = None  # None: an unsecured token of `unsecured_claims`
    client_id: str = ""
    client_secret: str = ""
    scope: str = ""
    unsecured_claims: tuple[tuple[str, str | float | tuple[str, ...]], ...] = ()
    unsecured_lifetime_s: int = 3600
    trust: TlsClientSettings = TlsClientSettings()  # of an https:// token endpoint


@dataclass(frozen=True, slots=True)
class SaslClientSettings:
    mechanism: str
    username: str = ""
    password: str = ""
    kerberos: KerberosClientSettings | None = None
    oauth: OAuthClientSettings | None = None
    token_auth: bool = False  # SCRAM with a delegation token (ScramLoginModule's tokenauth="true")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    tls: TlsClientSettings | None = None
    sasl: SaslClientSettings | None = None

    @property
    def is_plaintext(self) -> bool:
        return self.tls is None and self.sasl is None


PLAINTEXT = ClientSecurity()


def _pem_type(props: Mapping[str, str], key: str) -> None:
    value = props.get(key)
    if value is not None and value.strip().upper() != "PEM":
        raise SecurityConfigError(f"invalid value {value!r} for {key!r}: only PEM is supported")


def _tls(props: Mapping[str, str]) -> TlsClientSettings:
    _pem_type(props, "ssl.truststore.type")
    _pem_type(props, "ssl.keystore.type")
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", ""):
        raise SecurityConfigError(
            f"invalid value {algorithm!r} for 'ssl.endpoint.identification.algorithm': expected https or empty")
    chain, key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    if (chain is None) != (key is None):
        raise SecurityConfigError("'ssl.keystore.certificate.chain' and 'ssl.keystore.key' must be set together")
    return TlsClientSettings(
        ca_location=props.get("ssl.truststore.location") or props.get("ssl.ca.location") or None,
        ca_pem=props.get("ssl.truststore.certificates") or None,
        check_hostname=algorithm == "https",
        keystore_location=props.get("ssl.keystore.location") or None,
        certificate_chain_pem=chain,
        key_pem=key,
        key_password=props.get("ssl.key.password") or None,
    )


def _sasl(props: Mapping[str, str]) -> SaslClientSettings:
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in CLIENT_SASL_MECHANISMS:
        raise SecurityConfigError(f"invalid value {mechanism!r} for 'sasl.mechanism': "
                                  f"supported: {', '.join(CLIENT_SASL_MECHANISMS)}")
    text = props.get("sasl.jaas.config")
    if not text:
        raise SecurityConfigError(f"'sasl.jaas.config' is required with sasl.mechanism={mechanism}")
    try:
        jaas = parse_jaas_config(text)
    except JaasConfigError as exc:
        raise SecurityConfigError(f"invalid value for 'sasl.jaas.config': {exc}") from None
    if jaas.login_module != _LOGIN_MODULES[mechanism]:
        raise SecurityConfigError(f"invalid value for 'sasl.jaas.config': {mechanism} needs "
                                  f"{_LOGIN_MODULES[mechanism]}, got {jaas.login_module}")
    if mechanism == GSSAPI:
        return SaslClientSettings(mechanism, kerberos=_kerberos(props, jaas))
    if mechanism == OAUTHBEARER:
        return SaslClientSettings(mechanism, oauth=_oauth(props, jaas))
    username, password = jaas.options.get("username"), jaas.options.get("password")
    if username is None or password is None:
        raise SecurityConfigError("invalid value for 'sasl.jaas.config': username and password are required")
    token_auth = jaas.options.get("tokenauth", "false").strip().lower() == "true"
    if token_auth and mechanism not in SCRAM_MECHANISM_NAMES:
        raise SecurityConfigError(f"invalid value for 'sasl.jaas.config': tokenauth needs a SCRAM mechanism, "
                                  f"not {mechanism}")
    return SaslClientSettings(mechanism, username, password, token_auth=token_auth)


def _kerberos(props: Mapping[str, str], jaas: JaasConfig) -> KerberosClientSettings:
    service = (props.get("sasl.kerberos.service.name") or jaas.options.get("serviceName") or "").strip()
    if not service:
        raise SecurityConfigError("'sasl.kerberos.service.name' is required with sasl.mechanism=GSSAPI "
                                  "(the first part of the brokers' Kerberos principals, often kafka)")
    options = jaas.options
    if options.get("useKeyTab", "false").lower() == "true":
        keytab, principal = options.get("keyTab"), options.get("principal")
        if not keytab or not principal:
            raise SecurityConfigError("invalid value for 'sasl.jaas.config': useKeyTab=true needs keyTab and principal")
        return KerberosClientSettings(service, principal=principal, keytab=keytab)
    if options.get("useTicketCache", "false").lower() == "true":
        return KerberosClientSettings(service, principal=options.get("principal"),
                                      ticket_cache=options.get("ticketCache"))
    raise SecurityConfigError("invalid value for 'sasl.jaas.config': GSSAPI needs useKeyTab=true (with keyTab and "
                              "principal) or useTicketCache=true")


def jaas_tls(options: Mapping[str, str]) -> TlsClientSettings:
    """How an identity provider's https:// endpoints are trusted: the `ssl.*` options of an
    OAuthBearerLoginModule JAAS config, as Kafka's `JaasOptionsUtils` reads them (PEM only);
    the system CAs when none is given. `ValueError` for a truststore that is not PEM."""
    kind = options.get("ssl.truststore.type", "PEM").strip().upper()
    if kind != "PEM":
        raise ValueError(f"ssl.truststore.type {kind} in the OAUTHBEARER JAAS options: only PEM is supported")
    return TlsClientSettings(ca_location=options.get("ssl.truststore.location") or None,
                             ca_pem=options.get("ssl.truststore.certificates") or None,
                             check_hostname=options.get("ssl.endpoint.identification.algorithm", "https")
                             .strip().lower() == "https")


def _oauth(props: Mapping[str, str], jaas: JaasConfig) -> OAuthClientSettings:
    options = jaas.options
    endpoint = props.get("sasl.oauthbearer.token.endpoint.url")
    if endpoint and endpoint.lower().startswith("file:"):  # a token another process keeps fresh
        return OAuthClientSettings(endpoint)
    if endpoint:
        client_id = props.get("sasl.oauthbearer.client.credentials.client.id") or options.get("clientId", "")
        secret = props.get("sasl.oauthbearer.client.credentials.client.secret") or options.get("clientSecret", "")
        if not client_id or not secret:
            raise SecurityConfigError("OAUTHBEARER with 'sasl.oauthbearer.token.endpoint.url' needs a client id and "
                                      "secret (JAAS clientId and clientSecret)")
        try:
            trust = jaas_tls(options)
        except ValueError as exc:
            raise SecurityConfigError(f"invalid value for 'sasl.jaas.config': {exc}") from None
        return OAuthClientSettings(endpoint, client_id, secret, props.get("sasl.oauthbearer.scope")
                                   or options.get("scope", ""), trust=trust)
    claims: list[tuple[str, str | float | tuple[str, ...]]] = []
    for key, value in options.items():
        kind, _, name = key.removeprefix("unsecuredLogin").partition("Claim_")
        if not key.startswith("unsecuredLogin") or not name:
            continue
        if kind == "String":
            claims.append((name, value))
        elif kind == "Number":
            try:
                claims.append((name, float(value)))
            except ValueError:
                raise SecurityConfigError(f"invalid value for 'sasl.jaas.config': {key} is not a number") from None
        elif kind == "List":  # the first character is the separator, as in Kafka
            claims.append((name, tuple(v for v in value[1:].split(value[:1])) if value else ()))
    if not any(name == options.get("unsecuredLoginPrincipalClaimName", "sub") for name, _ in claims):
        raise SecurityConfigError("invalid value for 'sasl.jaas.config': OAUTHBEARER needs "
                                  "'sasl.oauthbearer.token.endpoint.url' or an unsecured token's "
                                  "unsecuredLoginStringClaim_sub")
    try:
        lifetime = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    except ValueError:
        raise SecurityConfigError("invalid value for 'sasl.jaas.config': unsecuredLoginLifetimeSeconds") from None
    return OAuthClientSettings(unsecured_claims=tuple(claims), unsecured_lifetime_s=lifetime)


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """The security of a client configured with `props` (other keys are ignored)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(f"invalid value {protocol!r} for 'security.protocol': "
                                  f"expected one of {', '.join(SECURITY_PROTOCOLS)}")
    tls = _tls(props) if protocol in ("SSL", "SASL_SSL") else None
    sasl = _sasl(props) if protocol.startswith("SASL_") else None
    return ClientSecurity(protocol, tls, sasl)
