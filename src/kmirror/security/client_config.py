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
`sasl.kerberos.service.name`, the first part of the brokers' principals. Keys this client does not know are ignored, as
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
from kmirror.security.plain import PLAIN
from kmirror.security.scram import SCRAM_MECHANISM_NAMES

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CLIENT_SASL_MECHANISMS = (GSSAPI, PLAIN, *SCRAM_MECHANISM_NAMES)
_LOGIN_MODULES = {GSSAPI: KRB5_LOGIN_MODULE, PLAIN: PLAIN_LOGIN_MODULE,
                  **{m: SCRAM_LOGIN_MODULE for m in SCRAM_MECHANISM_NAMES}}

# The keys `client_security` reads; a tool that refuses unknown client properties accepts these.
CLIENT_SECURITY_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.ca.location", "ssl.endpoint.identification.algorithm",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.key.password", "ssl.protocol", "ssl.enabled.protocols", "sasl.kerberos.service.name",
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
class SaslClientSettings:
    mechanism: str
    username: str = ""
    password: str = ""
    kerberos: KerberosClientSettings | None = None


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
    username, password = jaas.options.get("username"), jaas.options.get("password")
    if username is None or password is None:
        raise SecurityConfigError("invalid value for 'sasl.jaas.config': username and password are required")
    return SaslClientSettings(mechanism, username, password)


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


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """The security of a client configured with `props` (other keys are ignored)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(f"invalid value {protocol!r} for 'security.protocol': "
                                  f"expected one of {', '.join(SECURITY_PROTOCOLS)}")
    tls = _tls(props) if protocol in ("SSL", "SASL_SSL") else None
    sasl = _sasl(props) if protocol.startswith("SASL_") else None
    return ClientSecurity(protocol, tls, sasl)
