"""The security of one broker listener, from Kafka's broker configs.

Every key may be given per listener as `listener.name.<listener lower-case>.<key>`, which
wins over the unprefixed key (Kafka's listener prefix). The JAAS config of a SASL mechanism
is `listener.name.<listener>.<mechanism lower-case>.sasl.jaas.config` (Kafka's form), else
the unprefixed `sasl.jaas.config`; PLAIN's users are its `user_<name>="<password>"` options.
SCRAM-SHA-256/512 users are the credentials in the metadata log (AlterUserScramCredentials);
a JAAS config for them is optional and, when given, must name ScramLoginModule. GSSAPI
(Kerberos) needs `sasl.kerberos.service.name` and a JAAS config naming Krb5LoginModule with
`useKeyTab=true`, `keyTab` and the broker's `principal` (`<service name>/<host>@<REALM>`);
`sasl.kerberos.principal.to.local.rules` maps client principals to user names. OAUTHBEARER
needs a JAAS config naming OAuthBearerLoginModule; tokens are Kafka's unsecured ones
(`unsecuredValidator*` JAAS options) unless `sasl.server.callback.handler.class` names Kafka's
`OAuthBearerValidatorCallbackHandler`, which checks signed JWTs against the keys at
`sasl.oauthbearer.jwks.endpoint.url` (with `sasl.oauthbearer.expected.audience`,
`expected.issuer`, `sub.claim.name`, `scope.claim.name`, `clock.skew.seconds`).
SSL: `ssl.keystore.type=PEM` with `ssl.keystore.location` (key and certificate in one file)
or inline `ssl.keystore.certificate.chain` + `ssl.keystore.key`, `ssl.key.password` for an
encrypted key; `ssl.truststore.type=PEM` with `ssl.truststore.location` or inline
`ssl.truststore.certificates`; `ssl.client.auth` none | requested | required;
`ssl.principal.mapping.rules` maps a client certificate's subject to its principal
(`kmirror.security.ssl_principal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kmirror.security.client_config import TlsClientSettings, jaas_tls
from kmirror.security.gssapi import GSSAPI, KRB5_LOGIN_MODULE
from kmirror.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfig,
    JaasConfigError,
    parse_jaas_config,
)
from kmirror.security.kerberos_name import KerberosNameError
from kmirror.security.kerberos_name import parse_rules as parse_kerberos_rules
from kmirror.security.oauthbearer import OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE
from kmirror.security.plain import PLAIN
from kmirror.security.scram import SCRAM_MECHANISM_NAMES
from kmirror.security.ssl_principal import PrincipalMappingError, Rule, parse_rules

LISTENER_PREFIX = "listener.name."
SERVER_SASL_MECHANISMS = (GSSAPI, OAUTHBEARER, PLAIN, *SCRAM_MECHANISM_NAMES)
SECURED_VALIDATORS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
})
# keys also given per listener and mechanism: listener.name.<listener>.<mechanism>.<key>
MECHANISM_KEYS = frozenset({"sasl.jaas.config", "sasl.kerberos.service.name", "sasl.kerberos.principal.to.local.rules",
                            "sasl.server.callback.handler.class", "connections.max.reauth.ms"})
CLIENT_AUTH = ("none", "requested", "required")

# Broker keys that may also be given per listener (`listener.name.<listener>.<key>`).
LISTENER_SECURITY_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.protocol", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules", "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.kerberos.service.name",
    "sasl.kerberos.principal.to.local.rules", "sasl.server.callback.handler.class",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", "connections.max.reauth.ms",
})


class ListenerConfigError(ValueError):
    """A listener security config the broker refuses; `str()` names the key and why."""


@dataclass(frozen=True, slots=True)
class TlsServerSettings:
    keystore_location: str | None
    certificate_chain_pem: str | None
    key_pem: str | None
    key_password: str | None
    truststore_location: str | None
    truststore_pem: str | None
    client_auth: str
    principal_rules: tuple[Rule, ...] = (Rule(None),)  # ssl.principal.mapping.rules (DEFAULT)


@dataclass(frozen=True, slots=True)
class KerberosServerSettings:
    service_name: str
    principal: str  # the broker's: <service name>/<host>@<REALM>
    keytab: str
    principal_to_local_rules: str = "DEFAULT"


@dataclass(frozen=True, slots=True)
class OAuthBearerServerSettings:
    jwks_url: str | None = None  # None: Kafka's unsecured tokens
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scopes: tuple[str, ...] = ()
    clock_skew_ms: int = 30_000
    jwks_refresh_ms: int = 3_600_000
    jwks_trust: TlsClientSettings = TlsClientSettings()  # of an https:// JWK Set


@dataclass(frozen=True, slots=True)
class SaslServerSettings:
    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    kerberos: KerberosServerSettings | None = None
    oauthbearer: OAuthBearerServerSettings | None = None
    max_reauth_ms_by_mechanism: Mapping[str, int] = field(default_factory=dict)  # connections.max.reauth.ms

    def max_reauth_ms(self, mechanism: str) -> int:
        return self.max_reauth_ms_by_mechanism.get(mechanism, 0)


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    listener: str
    protocol: str
    tls: TlsServerSettings | None = None
    sasl: SaslServerSettings | None = None


def is_listener_security_key(key: str) -> bool:
    """`listener.name.<listener>.<security key>` or `listener.name.<listener>.<mech>.sasl.jaas.config`."""
    if not key.startswith(LISTENER_PREFIX):
        return False
    parts = key[len(LISTENER_PREFIX):].split(".", 1)
    if len(parts) != 2 or not parts[0]:
        return False
    rest = parts[1]
    if rest in LISTENER_SECURITY_KEYS:
        return True
    mech, _, tail = rest.partition(".")
    return bool(mech) and tail in MECHANISM_KEYS


class _Lookup:
    def __init__(self, raw: Mapping[str, str], listener: str) -> None:
        self.raw = raw
        self.prefix = f"{LISTENER_PREFIX}{listener.lower()}."

    def __call__(self, key: str, default: str | None = None) -> str | None:
        value = self.raw.get(self.prefix + key)
        if value is None:
            value = self.raw.get(key)
        return default if value is None else value


def _require_pem(get: _Lookup, key: str, listener: str) -> None:
    value = (get(key, "JKS") or "").strip().upper()
    if value != "PEM":
        raise ListenerConfigError(f"invalid value {value!r} for {key!r} of listener {listener}: only PEM is supported "
                                  f"(set {key}=PEM)")


def _tls(get: _Lookup, listener: str) -> TlsServerSettings:
    _require_pem(get, "ssl.keystore.type", listener)
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    if location is None and (chain is None or key is None):
        raise ListenerConfigError(f"listener {listener}: set 'ssl.keystore.location' or both "
                                  "'ssl.keystore.certificate.chain' and 'ssl.keystore.key'")
    truststore_location, truststore_pem = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if truststore_location is not None or truststore_pem is not None:
        _require_pem(get, "ssl.truststore.type", listener)
    client_auth = (get("ssl.client.auth", "none") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise ListenerConfigError(f"invalid value {client_auth!r} for 'ssl.client.auth' of listener {listener}: "
                                  f"expected one of {', '.join(CLIENT_AUTH)}")
    if client_auth != "none" and truststore_location is None and truststore_pem is None:
        raise ListenerConfigError(f"listener {listener}: ssl.client.auth={client_auth} needs a truststore")
    try:
        rules = parse_rules(get("ssl.principal.mapping.rules", "DEFAULT") or "DEFAULT")
    except PrincipalMappingError as exc:
        raise ListenerConfigError(f"invalid value for 'ssl.principal.mapping.rules' of listener {listener}: "
                                  f"{exc}") from None
    return TlsServerSettings(location, chain, key, get("ssl.key.password") or get("ssl.keystore.password"),
                             truststore_location, truststore_pem, client_auth, rules)


def _sasl(get: _Lookup, listener: str) -> SaslServerSettings:
    text = get("sasl.enabled.mechanisms", "GSSAPI") or ""
    mechanisms = tuple(m.strip().upper() for m in text.split(",") if m.strip())
    if not mechanisms:
        raise ListenerConfigError(f"listener {listener}: 'sasl.enabled.mechanisms' is empty")
    unsupported = [m for m in mechanisms if m not in SERVER_SASL_MECHANISMS]
    if unsupported:
        raise ListenerConfigError(f"invalid value {','.join(mechanisms)!r} for 'sasl.enabled.mechanisms' of listener "
                                  f"{listener}: {', '.join(unsupported)} not supported "
                                  f"(supported: {', '.join(SERVER_SASL_MECHANISMS)})")
    users: dict[str, str] = {}
    if PLAIN in mechanisms:
        jaas = _jaas(get, listener, PLAIN, PLAIN_LOGIN_MODULE, 'required user_<name>="<password>";')
        users = jaas.users
    for mechanism in mechanisms:
        # SCRAM's users are in the metadata log: its own JAAS config is optional, checked when given
        if mechanism in SCRAM_MECHANISM_NAMES and get(f"{mechanism.lower()}.sasl.jaas.config") is not None:
            _jaas(get, listener, mechanism, SCRAM_LOGIN_MODULE)
    kerberos = _kerberos(get, listener) if GSSAPI in mechanisms else None
    oauthbearer = _oauthbearer(get, listener) if OAUTHBEARER in mechanisms else None
    reauth: dict[str, int] = {}
    for mechanism in mechanisms:
        text = get(f"{mechanism.lower()}.connections.max.reauth.ms") or get("connections.max.reauth.ms") or "0"
        try:
            reauth[mechanism] = int(text)
        except ValueError:
            raise ListenerConfigError(f"invalid value {text!r} for 'connections.max.reauth.ms' of listener "
                                      f"{listener}: not a number") from None
    return SaslServerSettings(mechanisms, users, kerberos, oauthbearer, reauth)


def _oauthbearer(get: _Lookup, listener: str) -> OAuthBearerServerSettings:
    jaas = _jaas(get, listener, OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE)
    handler = get("oauthbearer.sasl.server.callback.handler.class") or get("sasl.server.callback.handler.class")
    try:
        skew_s = int(get("sasl.oauthbearer.clock.skew.seconds", "30") or "30")
        refresh_ms = int(get("sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000") or "3600000")
        unsecured_skew_ms = int(jaas.options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
    except ValueError as exc:
        raise ListenerConfigError(f"listener {listener}: OAUTHBEARER: {exc}") from None
    if not handler:
        options = jaas.options
        scopes = options.get("unsecuredValidatorRequiredScope", "")
        return OAuthBearerServerSettings(
            principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "sub"),
            scope_claim=options.get("unsecuredValidatorScopeClaimName", "scope"),
            required_scopes=tuple(s for s in scopes.replace(",", " ").split() if s), clock_skew_ms=unsecured_skew_ms)
    if handler not in SECURED_VALIDATORS:
        raise ListenerConfigError(f"listener {listener}: sasl.server.callback.handler.class {handler} is not "
                                  f"supported (supported: {', '.join(sorted(SECURED_VALIDATORS))})")
    url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ListenerConfigError(f"listener {listener}: {handler} needs 'sasl.oauthbearer.jwks.endpoint.url'")
    audience = get("sasl.oauthbearer.expected.audience") or ""
    try:
        trust = jaas_tls(jaas.options)
    except ValueError as exc:
        raise ListenerConfigError(f"listener {listener}: {exc}") from None
    return OAuthBearerServerSettings(
        jwks_url=url, expected_audience=tuple(a.strip() for a in audience.split(",") if a.strip()),
        expected_issuer=get("sasl.oauthbearer.expected.issuer") or None,
        principal_claim=get("sasl.oauthbearer.sub.claim.name", "sub") or "sub",
        scope_claim=get("sasl.oauthbearer.scope.claim.name", "scope") or "scope",
        clock_skew_ms=skew_s * 1000, jwks_refresh_ms=refresh_ms, jwks_trust=trust)


def _kerberos(get: _Lookup, listener: str) -> KerberosServerSettings:
    service = (get("gssapi.sasl.kerberos.service.name") or get("sasl.kerberos.service.name") or "").strip()
    if not service:
        raise ListenerConfigError(f"listener {listener}: GSSAPI needs 'sasl.kerberos.service.name' (the first part "
                                  "of the broker's Kerberos principal, often kafka)")
    jaas = _jaas(get, listener, GSSAPI, KRB5_LOGIN_MODULE, 'required useKeyTab=true keyTab="..." principal="...";')
    keytab, principal = jaas.options.get("keyTab"), jaas.options.get("principal")
    if jaas.options.get("useKeyTab", "false").lower() != "true" or not keytab or not principal:
        raise ListenerConfigError(f"invalid JAAS config for GSSAPI on listener {listener}: a broker logs in from "
                                  "a keytab: set useKeyTab=true, keyTab and principal")
    if principal.partition("@")[0].partition("/")[0] != service:
        raise ListenerConfigError(f"listener {listener}: the JAAS principal {principal} does not start with "
                                  f"sasl.kerberos.service.name {service}")
    rules = get("gssapi.sasl.kerberos.principal.to.local.rules") or get("sasl.kerberos.principal.to.local.rules")
    try:
        parse_kerberos_rules(rules or "DEFAULT")
    except KerberosNameError as exc:
        raise ListenerConfigError(f"invalid value for 'sasl.kerberos.principal.to.local.rules': {exc}") from None
    return KerberosServerSettings(service, principal, keytab, rules or "DEFAULT")


def _jaas(get: _Lookup, listener: str, mechanism: str, module: str, example: str = "required;") -> JaasConfig:
    """`mechanism`'s JAAS config on `listener`: `listener.name.<listener>.<mechanism>.sasl.jaas.config`,
    else the unprefixed `sasl.jaas.config`; it must name `module`."""
    text = get(f"{mechanism.lower()}.sasl.jaas.config") or get("sasl.jaas.config")
    if text is None:
        raise ListenerConfigError(f"listener {listener}: {mechanism} needs "
                                  f"'{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config' "
                                  f"({module} {example})")
    try:
        jaas = parse_jaas_config(text)
    except JaasConfigError as exc:
        raise ListenerConfigError(f"invalid JAAS config for {mechanism} on listener {listener}: {exc}") from None
    if jaas.login_module != module:
        raise ListenerConfigError(f"invalid JAAS config for {mechanism} on listener {listener}: "
                                  f"expected {module}, got {jaas.login_module}")
    return jaas


def listener_security(raw: Mapping[str, str], listener: str, protocol: str) -> ListenerSecurity:
    """The security of `listener` (speaking `protocol`) from the broker's properties `raw`."""
    get = _Lookup(raw, listener)
    tls = _tls(get, listener) if protocol in ("SSL", "SASL_SSL") else None
    sasl = _sasl(get, listener) if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else None
    return ListenerSecurity(listener, protocol, tls, sasl)
