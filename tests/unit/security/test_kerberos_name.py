"""Kerberos principals mapped to short names by Kafka's sasl.kerberos.principal.to.local.rules
(KerberosName, KerberosRule, KerberosShortNamer)."""

import pytest

from kmirror.security.kerberos_name import (
    DEFAULT_RULES,
    KerberosName,
    KerberosNameError,
    parse_rules,
    principal_to_local,
    short_name,
)

REALM = "REALM.COM"


def _short(principal: str, rules: str, default_realm: str = REALM) -> str:
    return short_name(KerberosName.parse(principal), parse_rules(rules, default_realm))


def test_a_principal_parses_into_its_components_and_prints_back() -> None:
    cases = {
        "App.service-name/example.com@REALM.COM": KerberosName("App.service-name", "example.com", REALM),
        "App.service-name@REALM.COM": KerberosName("App.service-name", None, REALM),
        "user/host@REALM.COM": KerberosName("user", "host", REALM),
        "alice": KerberosName("alice"),
        "alice@": KerberosName("alice", None, ""),
        "service/host": KerberosName("service/host"),  # no realm: Kafka keeps it whole
    }
    for text, name in cases.items():
        assert KerberosName.parse(text) == name
        assert str(name) == text
    assert str(KerberosName("kafka", "broker1", None)) == "kafka/broker1"


def test_a_malformed_principal_is_refused() -> None:
    for text in ("a@b@C", "a/b/c@C", "a@REALM/x"):
        with pytest.raises(KerberosNameError, match="Malformed Kerberos name"):
            KerberosName.parse(text)


def test_kafkas_parse_case_maps_app_principals_and_falls_back_to_default() -> None:
    rules = r"RULE:[1:$1](App\..*)s/App\.(.*)/$1/g, RULE:[2:$1](App\..*)s/App\.(.*)/$1/g, DEFAULT"
    assert _short("App.service-name/example.com@REALM.COM", rules) == "service-name"
    assert _short("App.service-name@REALM.COM", rules) == "service-name"
    assert _short("user/host@REALM.COM", rules) == "user"


@pytest.mark.parametrize(("case", "expected"), [
    ("L", ["user", "test", "xyz_user_xyz", "service-name", "user"]),
    ("U", ["USER", "TEST", "XYZ_USER_XYZ", "SERVICE-NAME", "USER"]),
])
def test_l_and_u_change_the_case_of_the_result(case: str, expected: list[str]) -> None:
    rules = "\n".join([
        f"RULE:[1:$1]/{case}",
        f"RULE:[2:$1](Test.*)s/ABC///{case}",
        f"RULE:[2:$1](ABC.*)s/ABC/XYZ/g/{case}",
        rf"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g/{case}",
        f"RULE:[2:$1]/{case}",
        "DEFAULT",
    ])
    principals = ["User@REALM.COM", "TestABC/host@FOO.COM", "ABC_User_ABC/host@FOO.COM",
                  "App.SERVICE-name/example.com@REALM.COM", "User/root@REALM.COM"]
    assert [_short(p, rules) for p in principals] == expected


@pytest.mark.parametrize("rule", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/g",
    "rule:[1:$1]", "rule:[1:$1]/L/U", "rule:[1:$1]/U/L", "rule:[1:$1]/LU",
    "RULE:[1:$1/L", "RULE:[1:$1]/l", "RULE:[2:$1](ABC.*)s/ABC/XYZ/L/g",
])
def test_kafkas_invalid_rules_are_refused_naming_the_rule(rule: str) -> None:
    with pytest.raises(KerberosNameError, match="Invalid rule") as raised:
        parse_rules(rule, REALM)
    assert rule in str(raised.value)


def test_an_unmatched_tail_is_named_in_kafkas_words() -> None:
    with pytest.raises(KerberosNameError, match=r"Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"):
        parse_rules("DEFAULT/L", REALM)


@pytest.mark.parametrize("rule", [
    "RULE:[:$1]",  # no number of components
    "RULE:[1:$2]",  # a parameter past the components
    "RULE:[1:hello $a]",  # $ without a number
    "RULE:[1:$1](a[)",  # a bad match regex
    "RULE:[1:$1]s/(a/b/",  # a bad from regex
    "RULE:[1:$1]s/(a)/$2/",  # a group the from regex lacks
    "RULE:[1:$1]s/a/$x/",  # an illegal group reference
    "RULE:[1:$1]s/a/b\\/",  # nothing to escape
])
def test_rules_kafka_would_fail_on_use_are_refused_when_parsed(rule: str) -> None:
    with pytest.raises(KerberosNameError, match="Invalid rule"):
        parse_rules(rule, REALM)


def test_rules_are_separated_by_commas_or_newlines_and_print_as_kafka_writes_them() -> None:
    text = " RULE:[2:$1@$0](.*@EXAMPLE.COM)s/@.*//L ,\n\n RULE:[1:$1]s/x/y/g/U,DEFAULT\n"
    rules = parse_rules(text, REALM)
    written = ["RULE:[2:$1@$0](.*@EXAMPLE.COM)s/@.*///L", "RULE:[1:$1]s/x/y/g/U", "DEFAULT"]
    assert [str(r) for r in rules] == written
    assert parse_rules(",".join(written), REALM) == rules
    assert parse_rules("", REALM) == ()
    assert [str(r) for r in parse_rules("RULE:[1:$1]/", REALM)] == ["RULE:[1:$1]"]


def test_format_parameters_are_the_realm_and_the_components() -> None:
    assert _short("kafka/broker1@EXAMPLE.COM", "RULE:[2:$2-$1@$0](.*)s/@EXAMPLE.COM//") == "broker1-kafka"
    assert _short("alice@EXAMPLE.COM", "RULE:[1:hello $0]s/[.]/_/g") == "hello EXAMPLE_COM"
    assert _short("alice@EXAMPLE.COM", "RULE:[1:$1$1]") == "alicealice"
    # a parameter's own $ is not substituted again
    assert _short("a$1@R", "RULE:[1:$1]") == "a$1"


def test_the_match_regex_must_match_the_whole_built_string() -> None:
    rules = "RULE:[1:$1@$0](alice@EXAMPLE)s/@.*//, RULE:[1:x]"
    assert _short("alice@EXAMPLE", rules) == "alice"
    assert _short("alice@EXAMPLE.COM", rules) == "x"


def test_the_substitution_replaces_the_first_match_or_all_with_g() -> None:
    assert _short("a.b.c@R", "RULE:[1:$1]s/[.]/_/") == "a_b.c"
    assert _short("a.b.c@R", "RULE:[1:$1]s/[.]/_/g") == "a_b_c"
    assert _short("abc@R", "RULE:[1:$1]s/x*/-/g") == "-a-b-c-"
    assert _short("abc@R", "RULE:[1:$1]s/zz/y/") == "abc"  # no match: kept


def test_java_replacement_syntax_names_groups() -> None:
    assert _short("ab@R", "RULE:[1:$1]s/(a)(b)/$2$1/") == "ba"
    assert _short("ab@R", "RULE:[1:$1]s/(a)(b)/$0$0/") == "abab"
    assert _short("ab@R", "RULE:[1:$1]s/(a)(b)/$21/") == "b1"  # only 2 groups: $2 then 1
    assert _short("ab@R", "RULE:[1:$1]s/(?P<first>a)b/${first}!/") == "a!"
    assert _short("ab@R", "RULE:[1:$1]s/(a)b/\\$1\\x/") == "$1x"
    assert _short("ab@R", "RULE:[1:$1]s/(x)?(a)b/[$1]/") == "[]"  # an unmatched group is empty
    assert _short("ab@R", r"RULE:[1:$1]s/(a)b/\1/") == "1"  # \1 is a literal 1, not a group


def test_the_first_rule_that_gives_a_name_wins() -> None:
    rules = "RULE:[1:$1](bob)s/.*/first/, RULE:[1:$1]s/.*/second/, DEFAULT"
    assert _short("bob@REALM.COM", rules) == "first"
    assert _short("alice@REALM.COM", rules) == "second"
    assert _short("alice@REALM.COM", "DEFAULT, RULE:[1:other]") == "alice"


def test_default_keeps_the_first_component_of_the_default_realm_only() -> None:
    assert _short("alice@REALM.COM", "DEFAULT") == "alice"
    assert _short("kafka/broker1@REALM.COM", "DEFAULT") == "kafka"
    with pytest.raises(KerberosNameError, match=r"No rules apply to alice@OTHER.COM, rules \[DEFAULT\]"):
        _short("alice@OTHER.COM", "DEFAULT")


def test_default_applies_to_no_name_without_a_realm() -> None:
    with pytest.raises(KerberosNameError, match="No rules apply to kafka/broker1"):
        short_name(KerberosName("kafka", "broker1", None), parse_rules("DEFAULT", REALM))
    with pytest.raises(KerberosNameError, match="No rules apply"):
        short_name(KerberosName("alice", None, REALM), parse_rules("DEFAULT", None))
    # a $0 with no realm reads "null", as Java appends a null string
    assert short_name(KerberosName("kafka", "h", None), parse_rules("RULE:[2:$0]", REALM)) == "null"


def test_a_name_without_realm_is_already_short() -> None:
    assert _short("alice", "RULE:[1:$1]s/.*/other/") == "alice"
    assert _short("service/host", "") == "service/host"


def test_a_name_no_rule_maps_raises_in_kafkas_words() -> None:
    rules = r"RULE:[1:$1](App\..*)s/App\.(.*)/$1/g, RULE:[2:$1]/L"
    with pytest.raises(KerberosNameError) as raised:
        _short("alice@REALM.COM", rules)
    assert str(raised.value) == (
        r"No rules apply to alice@REALM.COM, rules [RULE:[1:$1](App\..*)s/App\.(.*)/$1/g, RULE:[2:$1]/L]")
    with pytest.raises(KerberosNameError, match="No rules apply"):
        _short("alice@REALM.COM", "")


def test_a_result_with_a_slash_or_at_sign_is_refused_not_passed_over() -> None:
    for rule in ("RULE:[2:$1/$2]", "RULE:[2:$1@$0]"):
        with pytest.raises(KerberosNameError, match=r"Non-simple name kafka[/@]\S+ after auth_to_local rule RULE"):
            _short("kafka/broker1@REALM.COM", f"{rule}, DEFAULT")


def test_principal_to_local_parses_then_maps_with_the_default_realm_given() -> None:
    assert principal_to_local("alice@REALM.COM", DEFAULT_RULES, REALM) == "alice"
    assert principal_to_local("alice", DEFAULT_RULES) == "alice"
    with pytest.raises(KerberosNameError, match="No rules apply"):
        principal_to_local("alice@OTHER.COM", DEFAULT_RULES, REALM)
    # the realm given here stands in for the one the rules were parsed with
    rules = parse_rules("DEFAULT", "OTHER.COM")
    assert principal_to_local("alice@OTHER.COM", rules) == "alice"
    assert principal_to_local("alice@REALM.COM", rules, REALM) == "alice"
