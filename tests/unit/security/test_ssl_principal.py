"""A TLS client certificate's principal: the subject as Java's X500Principal.getName() writes
it, mapped by Kafka's ssl.principal.mapping.rules (SslPrincipalMapper)."""

import pytest

from kmirror.security.ssl_principal import (
    PrincipalMappingError,
    certificate_principal,
    distinguished_name,
    parse_rules,
    principal_name,
)

# what ssl.SSLSocket.getpeercert() gives for /C=US/ST=CA/O=Acme, Inc/OU=Eng+UID=7/CN=alice
SUBJECT = ((("countryName", "US"),), (("stateOrProvinceName", "CA"),), (("organizationName", "Acme, Inc"),),
           (("organizationalUnitName", "Eng"), ("userId", "7")), (("commonName", "alice"),))


def test_the_name_is_rfc_2253_with_the_last_rdn_first_as_java_writes_it() -> None:
    assert distinguished_name(SUBJECT) == "CN=alice,OU=Eng+UID=7,O=Acme\\, Inc,ST=CA,C=US"
    assert distinguished_name(((("commonName", " #x;y "),),)) == "CN=\\ #x\\;y\\ "
    assert distinguished_name(((("commonName", "#x"),),)) == "CN=\\#x"
    assert distinguished_name(((("emailAddress", "a@b"),),)) == "1.2.840.113549.1.9.1=a@b"


def test_default_keeps_the_name_and_rules_map_it_in_order() -> None:
    assert principal_name(SUBJECT, parse_rules("DEFAULT")) == "CN=alice,OU=Eng+UID=7,O=Acme\\, Inc,ST=CA,C=US"
    rules = parse_rules("RULE:^CN=(.*?),OU=Ops.*$/$1/, RULE:^CN=(.*?),OU=(.*?)\\+.*$/$1@$2/U, DEFAULT")
    assert principal_name(SUBJECT, rules) == "ALICE@ENG"
    assert principal_name(((("commonName", "bob"),), (("organizationalUnitName", "Ops"),))[::-1], rules) == "bob"
    assert principal_name(((("commonName", "x"),),), rules) == "CN=x"  # DEFAULT, last
    assert principal_name(((("commonName", "Svc"),),), parse_rules("RULE:^CN=(.*)$/svc-$1/L")) == "svc-svc"
    assert principal_name(((("commonName", "a"),),), parse_rules("RULE:^CN=(.*)$/x\\/$1/")) == "x/a"


def test_a_name_no_rule_matches_has_no_principal_and_bad_rules_are_refused() -> None:
    with pytest.raises(PrincipalMappingError, match="No rules apply to CN=alice"):
        principal_name(SUBJECT, parse_rules("RULE:^CN=bob$/bob/"))
    for bad in ("RULE:^CN=(.*$/x/", "nonsense", "RULE:a/b"):
        with pytest.raises(PrincipalMappingError):
            parse_rules(bad)


def test_a_client_without_a_certificate_or_off_tls_has_no_certificate_principal() -> None:
    rules = parse_rules("DEFAULT")
    assert certificate_principal({"subject": SUBJECT}, rules) == "CN=alice,OU=Eng+UID=7,O=Acme\\, Inc,ST=CA,C=US"
    assert certificate_principal({}, rules) is None  # TLS, no client certificate
    assert certificate_principal(None, rules) is None
    assert certificate_principal({"subject": SUBJECT}, None) is None  # not a TLS listener
