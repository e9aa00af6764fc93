from __future__ import annotations

import pytest

from kmirror.config.definitions import ConfigError
from kmirror.config.server import ServerConfig
from kmirror.security.client_config import (
    KerberosClientSettings,
    OAuthClientSettings,
    SecurityConfigError,
    TlsClientSettings,
    client_security,
)
from kmirror.security.gssapi import KRB5_LOGIN_MODULE as KRB5_MODULE
from kmirror.security.jaas import JaasConfigError, parse_jaas_config
from kmirror.security.listener_config import (
    KerberosServerSettings,
    ListenerConfigError,
    OAuthBearerServerSettings,
    is_listener_security_key,
    listener_security,
)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_jaas_config_options_quoted_bare_and_escaped() -> None:
    jaas = parse_jaas_config(f'{PLAIN_MODULE} required username="al ice" password=p\\w user_bob="b\\"ob";')
    assert jaas.login_module == PLAIN_MODULE and jaas.flag == "required"
    assert jaas.options == {"username": "al ice", "password": "p\\w", "user_bob": 'b"ob'}
    assert jaas.users == {"bob": 'b"ob'}


@pytest.mark.parametrize(("text", "why"), [
    ("", "expected"),
    (f"{PLAIN_MODULE} required username=\"a\"", "must end with ';'"),
    (f"{PLAIN_MODULE} always;", "invalid control flag"),
    (f"{PLAIN_MODULE} required username;", "key=value"),
    (f"{PLAIN_MODULE} required; {PLAIN_MODULE} required;", "exactly one"),
])
def test_jaas_config_errors(text: str, why: str) -> None:
    with pytest.raises(JaasConfigError, match=why):
        parse_jaas_config(text)


def test_client_security_sasl_ssl() -> None:
    s = client_security({"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN",
                         "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="p";',
                         "ssl.ca.location": "/ca.pem", "ssl.endpoint.identification.algorithm": ""})
    assert s.protocol == "SASL_SSL" and s.sasl is not None and s.tls is not None
    assert (s.sasl.mechanism, s.sasl.username, s.sasl.password) == ("PLAIN", "u", "p")
    assert s.tls.ca_location == "/ca.pem" and not s.tls.check_hostname


def test_client_security_defaults_to_plaintext_and_ssl_verifies_host_names() -> None:
    assert client_security({}).is_plaintext
    tls = client_security({"security.protocol": "SSL"}).tls
    assert tls is not None and tls.check_hostname and tls.ca_location is None


@pytest.mark.parametrize(("props", "why"), [
    ({"security.protocol": "TLS"}, "'security.protocol'"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "'sasl.jaas.config' is required"),  # Kafka's default GSSAPI
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "AWS_MSK_IAM"}, "'sasl.mechanism'"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": f"{KRB5_MODULE} required useTicketCache=true;"},
     "'sasl.kerberos.service.name' is required"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.kerberos.service.name": "kafka",
      "sasl.jaas.config": f"{KRB5_MODULE} required useKeyTab=true principal=a;"}, "needs keyTab and principal"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.kerberos.service.name": "kafka",
      "sasl.jaas.config": f"{KRB5_MODULE} required;"}, "useKeyTab=true .* or useTicketCache=true"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required username=u password=p;"},
     "PLAIN needs"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f"{PLAIN_MODULE} required username=u;"}, "username and password"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "https or empty"),
    ({"security.protocol": "SSL", "ssl.keystore.key": "k"}, "must be set together"),
])
def test_client_security_errors(props: dict[str, str], why: str) -> None:
    with pytest.raises(SecurityConfigError, match=why):
        client_security(props)


def test_client_security_gssapi_from_a_keytab_or_a_ticket_cache() -> None:
    keytab = client_security({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
        "sasl.jaas.config": f'{KRB5_MODULE} required useKeyTab=true keyTab="/k.keytab" principal="m@R";'}).sasl
    assert keytab is not None and keytab.kerberos == KerberosClientSettings("kafka", "m@R", "/k.keytab")
    cache = client_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.kerberos.service.name": "kafka",
        "sasl.jaas.config": f"{KRB5_MODULE} required useTicketCache=true;"}).sasl
    assert cache is not None and cache.mechanism == "GSSAPI" and cache.kerberos == KerberosClientSettings("kafka")


OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def test_client_security_oauthbearer_client_credentials_or_an_unsecured_token() -> None:
    oidc = client_security({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="app" clientSecret="s" scope="kafka";'}).sasl
    assert oidc is not None and oidc.oauth == OAuthClientSettings("https://idp/token", "app", "s", "kafka")
    kip1139 = client_security({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token", "sasl.jaas.config": f"{OAUTH_MODULE} required;",
        "sasl.oauthbearer.client.credentials.client.id": "app", "sasl.oauthbearer.client.credentials.client.secret": "s"})
    assert kip1139.sasl is not None and kip1139.sasl.oauth == OAuthClientSettings("https://idp/token", "app", "s")
    unsecured = client_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="alice" '
                            'unsecuredLoginListClaim_scope=",kafka,read" unsecuredLoginLifetimeSeconds=60;'}).sasl
    assert unsecured is not None and unsecured.oauth == OAuthClientSettings(
        unsecured_claims=(("sub", "alice"), ("scope", ("kafka", "read"))), unsecured_lifetime_s=60)
    tls = client_security({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="app" clientSecret="s" '
                            'ssl.truststore.location="/ca.pem" ssl.endpoint.identification.algorithm="";'}).sasl
    assert tls is not None and tls.oauth is not None and tls.oauth.trust == TlsClientSettings(ca_location="/ca.pem", check_hostname=False)
    file_token = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                                  "sasl.oauthbearer.token.endpoint.url": "file:///run/token",
                                  "sasl.jaas.config": f"{OAUTH_MODULE} required;"}).sasl
    assert file_token is not None and file_token.oauth == OAuthClientSettings("file:///run/token")
    with pytest.raises(SecurityConfigError, match="only PEM"):
        client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                         "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                         "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="a" clientSecret="s" '
                                             'ssl.truststore.type="JKS";'})
    with pytest.raises(SecurityConfigError, match="needs a client id and secret"):
        client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                         "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                         "sasl.jaas.config": f"{OAUTH_MODULE} required;"})
    with pytest.raises(SecurityConfigError, match="unsecuredLoginStringClaim_sub"):
        client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                         "sasl.jaas.config": f"{OAUTH_MODULE} required;"})


def test_oauthbearer_listener_settings() -> None:
    raw = {"sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.jaas.config": f"{OAUTH_MODULE} required;",
           "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
           "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
           "sasl.oauthbearer.expected.audience": "brokers, admins", "sasl.oauthbearer.clock.skew.seconds": "5",
           "listener.name.open.oauthbearer.sasl.jaas.config":
               f'{OAUTH_MODULE} required unsecuredValidatorRequiredScope="kafka read";'}
    signed = listener_security(raw, "SIGNED", "SASL_PLAINTEXT").sasl
    assert signed is not None and signed.oauthbearer == OAuthBearerServerSettings(
        jwks_url="https://idp/jwks", expected_audience=("brokers", "admins"), clock_skew_ms=5000)
    unsecured = listener_security(raw, "OPEN", "SASL_PLAINTEXT").sasl
    assert unsecured is not None and unsecured.oauthbearer == OAuthBearerServerSettings(
        required_scopes=("kafka", "read"), clock_skew_ms=0)
    assert is_listener_security_key("listener.name.signed.oauthbearer.sasl.server.callback.handler.class")
    with pytest.raises(ListenerConfigError, match="needs 'sasl.oauthbearer.jwks.endpoint.url'"):
        listener_security({**raw, "sasl.oauthbearer.jwks.endpoint.url": ""}, "SIGNED", "SASL_PLAINTEXT")
    with pytest.raises(ListenerConfigError, match="com.example.Handler is not supported"):
        listener_security({**raw, "sasl.server.callback.handler.class": "com.example.Handler"}, "X", "SASL_PLAINTEXT")
    with pytest.raises(ListenerConfigError, match="OAUTHBEARER needs"):
        listener_security({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "X", "SASL_PLAINTEXT")


def gssapi_listener(**extra: str) -> dict[str, str]:
    return {"sasl.enabled.mechanisms": "GSSAPI,PLAIN", "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": f'{PLAIN_MODULE} required user_x="y";',
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                f'{KRB5_MODULE} required useKeyTab=true keyTab="/b.keytab" principal="kafka/b1@R";', **extra}


def test_gssapi_listener_settings() -> None:
    sasl = listener_security(gssapi_listener(**{"sasl.kerberos.principal.to.local.rules": "RULE:[1:$1]s/x/y/,DEFAULT"}),
                             "SASL_PLAINTEXT", "SASL_PLAINTEXT").sasl
    assert sasl is not None and sasl.enabled_mechanisms == ("GSSAPI", "PLAIN")
    assert sasl.kerberos == KerberosServerSettings("kafka", "kafka/b1@R", "/b.keytab", "RULE:[1:$1]s/x/y/,DEFAULT")


@pytest.mark.parametrize(("extra", "why"), [
    ({"sasl.kerberos.service.name": ""}, "needs 'sasl.kerberos.service.name'"),
    ({"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": f"{PLAIN_MODULE} required;"}, "expected " + KRB5_MODULE),
    ({"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": f"{KRB5_MODULE} required useTicketCache=true;"},
     "logs in from a keytab"),
    ({"sasl.kerberos.service.name": "kafka-dr"}, "does not start with sasl.kerberos.service.name kafka-dr"),
    ({"sasl.kerberos.principal.to.local.rules": "RULE:[1:$1](x"}, "principal.to.local.rules"),
])
def test_gssapi_listener_errors(extra: dict[str, str], why: str) -> None:
    with pytest.raises(ListenerConfigError, match=why):
        listener_security(gssapi_listener(**extra), "SASL_PLAINTEXT", "SASL_PLAINTEXT")


def base(**extra: str) -> dict[str, str]:
    return {"node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/server.pem", "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_alice="a";', **extra}


def test_server_config_listener_securities() -> None:
    cfg = ServerConfig.from_properties(base())
    sec = cfg.listener_securities["SASL_SSL"]
    assert sec.protocol == "SASL_SSL" and sec.tls is not None and sec.sasl is not None
    assert sec.tls.keystore_location == "/server.pem" and sec.tls.client_auth == "none"
    assert sec.sasl.enabled_mechanisms == ("PLAIN",) and dict(sec.sasl.plain_users) == {"alice": "a"}
    plain = cfg.listener_securities["PLAINTEXT"]
    assert plain.tls is None and plain.sasl is None
    assert cfg.inter_broker_listener_name == "PLAINTEXT"


def test_listener_prefixed_keys_win_over_unprefixed_ones() -> None:
    raw = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/a.pem",
           "listener.name.ssl.ssl.keystore.location": "/b.pem", "ssl.client.auth": "required",
           "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
           "sasl.jaas.config": f'{PLAIN_MODULE} required user_x="y";', "sasl.enabled.mechanisms": "PLAIN"}
    sec = listener_security(raw, "SSL", "SSL")
    assert sec.tls is not None and sec.tls.keystore_location == "/b.pem" and sec.tls.client_auth == "required"
    other = listener_security(raw, "OTHER", "SASL_PLAINTEXT")
    assert other.sasl is not None and dict(other.sasl.plain_users) == {"x": "y"}  # unprefixed sasl.jaas.config


def test_principal_mapping_rules_are_parsed_per_listener_and_bad_ones_refused() -> None:
    raw = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/a.pem",
           "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/L"}
    sec = listener_security(raw, "SSL", "SSL")
    assert sec.tls is not None and [r.case for r in sec.tls.principal_rules] == ["L"]
    default = listener_security({**raw, "listener.name.ssl.ssl.principal.mapping.rules": "DEFAULT"}, "SSL", "SSL")
    assert default.tls is not None and [r.pattern for r in default.tls.principal_rules] == [None]
    with pytest.raises(ListenerConfigError, match="ssl.principal.mapping.rules' of listener SSL"):
        listener_security({**raw, "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(/x/"}, "SSL", "SSL")


def test_listener_key_shapes() -> None:
    assert is_listener_security_key("listener.name.sasl_ssl.plain.sasl.jaas.config")
    assert is_listener_security_key("listener.name.external.ssl.keystore.location")
    assert not is_listener_security_key("listener.name.external.log.dirs")
    assert not is_listener_security_key("ssl.keystore.location")


@pytest.mark.parametrize(("extra", "why"), [
    ({"sasl.enabled.mechanisms": "AWS_MSK_IAM"}, "AWS_MSK_IAM not supported"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI needs 'sasl.kerberos.service.name'"),
    ({"listener.name.sasl_ssl.plain.sasl.jaas.config": "x required user_a=b;"}, "expected " + PLAIN_MODULE),
    ({"ssl.keystore.type": "JKS"}, "only PEM is supported"),
    ({"ssl.client.auth": "required"}, "needs a truststore"),
    ({"listener.name.sasl_ssl.ssl.client.auth": "maybe"}, "'ssl.client.auth'"),
    ({"inter.broker.listener.name": "SASL_SSL"}, "must be PLAINTEXT"),
    ({"listener.name.sasl_ssl.log.dirs": "/x"}, "unknown configuration"),
])
def test_server_config_security_errors(extra: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        ServerConfig.from_properties(base(**extra))
