"""StandardAuthorizer's decisions (Kafka's StandardAuthorizerData semantics)."""

from __future__ import annotations

import itertools
import uuid

import pytest

from kmirror.metadata.authorizer import (
    AuthorizationResult,
    AuthorizerSettings,
    DefaultRule,
    MatchingAclRule,
    StandardAuthorizer,
    SuperUserRule,
    parse_super_users,
)
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import AclPermissionType as Perm
from kmirror.metadata.controller.acls import PatternType as Pat
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.metadata.image import AclBinding

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"
_ids = itertools.count(1)


def acl(name: str = "orders", op: Op = Op.READ, perm: Perm = Perm.ALLOW, principal: str = ALICE,
        host: str = "*", pattern: Pat = Pat.LITERAL, rtype: Res = Res.TOPIC) -> AclBinding:
    return AclBinding(uuid.UUID(int=next(_ids)), rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings: AclBinding, super_users: str = "", allow_everyone: bool = False) -> StandardAuthorizer:
    return StandardAuthorizer(AuthorizerSettings(parse_super_users(super_users), allow_everyone),
                              {b.id: b for b in bindings})


def decide(a: StandardAuthorizer, op: Op = Op.READ, name: str = "orders", principal: str = ALICE,
           host: str = HOST, rtype: Res = Res.TOPIC) -> AuthorizationResult:
    return a.authorize(principal, host, op, rtype, name)


def test_no_acls_denies_by_default_and_allows_with_allow_everyone() -> None:
    assert decide(authorizer()) is DENIED
    assert decide(authorizer(allow_everyone=True)) is ALLOWED


def test_allow_everyone_applies_only_to_resources_without_any_acl() -> None:
    a = authorizer(acl(principal=BOB), allow_everyone=True)
    assert decide(a) is DENIED  # orders has an ACL (bob's): alice gets none
    assert decide(a, name="other") is ALLOWED
    # a prefixed or wildcard ACL counts as an ACL of the resource too
    assert decide(authorizer(acl("ord", pattern=Pat.PREFIXED, principal=BOB), allow_everyone=True)) is DENIED
    assert decide(authorizer(acl("*", principal=BOB), allow_everyone=True)) is DENIED
    # ...but an ACL of another resource type does not
    assert decide(authorizer(acl(rtype=Res.GROUP, principal=BOB), allow_everyone=True)) is ALLOWED


def test_literal_acl_matches_only_its_name() -> None:
    a = authorizer(acl("orders"))
    assert decide(a) is ALLOWED
    assert decide(a, name="orders2") is DENIED
    assert decide(a, name="order") is DENIED


def test_wildcard_resource_matches_every_name() -> None:
    a = authorizer(acl("*"))
    assert decide(a, name="anything") is ALLOWED
    assert decide(a, name="*") is ALLOWED
    assert decide(a, rtype=Res.GROUP) is DENIED


def test_prefixed_acl_matches_names_starting_with_it() -> None:
    a = authorizer(acl("ord", pattern=Pat.PREFIXED))
    assert decide(a, name="ord") is ALLOWED
    assert decide(a, name="orders") is ALLOWED
    assert decide(a, name="or") is DENIED
    assert decide(a, name="xorders") is DENIED


@pytest.mark.parametrize("deny", [
    acl("orders", perm=Perm.DENY),
    acl("*", perm=Perm.DENY),
    acl("ord", perm=Perm.DENY, pattern=Pat.PREFIXED),
    acl("orders", perm=Perm.DENY, principal="User:*"),
    acl("orders", perm=Perm.DENY, host=HOST),
    acl("orders", perm=Perm.DENY, op=Op.ALL),
])
def test_deny_wins_over_allow(deny: AclBinding) -> None:
    assert decide(authorizer(acl("orders", op=Op.ALL), acl("*"), deny)) is DENIED


def test_deny_for_another_principal_host_or_operation_does_not_apply() -> None:
    allow = acl("orders")
    assert decide(authorizer(allow, acl(perm=Perm.DENY, principal=BOB))) is ALLOWED
    assert decide(authorizer(allow, acl(perm=Perm.DENY, host="10.9.9.9"))) is ALLOWED
    assert decide(authorizer(allow, acl(perm=Perm.DENY, op=Op.WRITE))) is ALLOWED


def test_principal_must_match_or_be_the_wildcard() -> None:
    assert decide(authorizer(acl(principal=BOB))) is DENIED
    assert decide(authorizer(acl(principal="User:*"))) is ALLOWED
    assert decide(authorizer(acl(principal="User:*")), principal="User:ANONYMOUS") is ALLOWED
    assert decide(authorizer(acl(principal="Group:*"))) is DENIED  # only User:* is a wildcard


def test_host_must_match_or_be_the_wildcard() -> None:
    assert decide(authorizer(acl(host=HOST))) is ALLOWED
    assert decide(authorizer(acl(host="10.0.0.2"))) is DENIED
    assert decide(authorizer(acl(host="*"))) is ALLOWED


def test_all_operation_allows_every_operation() -> None:
    a = authorizer(acl(op=Op.ALL))
    for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
               Op.ALTER_CONFIGS):
        assert decide(a, op=op) is ALLOWED


def test_operation_must_match() -> None:
    a = authorizer(acl(op=Op.READ))
    assert decide(a, op=Op.WRITE) is DENIED
    assert decide(a, op=Op.ALTER) is DENIED


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_describe_is_implied_by_read_write_delete_alter(op: Op) -> None:
    assert decide(authorizer(acl(op=op)), op=Op.DESCRIBE) is ALLOWED


@pytest.mark.parametrize("op", [Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION,
                                Op.IDEMPOTENT_WRITE])
def test_describe_is_not_implied_by_other_operations(op: Op) -> None:
    assert decide(authorizer(acl(op=op)), op=Op.DESCRIBE) is DENIED


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    assert decide(authorizer(acl(op=Op.ALTER_CONFIGS)), op=Op.DESCRIBE_CONFIGS) is ALLOWED
    assert decide(authorizer(acl(op=Op.ALTER)), op=Op.DESCRIBE_CONFIGS) is DENIED
    # implication runs one way
    assert decide(authorizer(acl(op=Op.DESCRIBE)), op=Op.READ) is DENIED
    assert decide(authorizer(acl(op=Op.DESCRIBE_CONFIGS)), op=Op.ALTER_CONFIGS) is DENIED


def test_deny_implies_nothing() -> None:
    a = authorizer(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=Perm.DENY))
    assert decide(a, op=Op.DESCRIBE) is ALLOWED
    assert decide(a, op=Op.READ) is DENIED
    b = authorizer(acl(op=Op.ALTER_CONFIGS), acl(op=Op.ALTER_CONFIGS, perm=Perm.DENY))
    assert decide(b, op=Op.DESCRIBE_CONFIGS) is ALLOWED


def test_super_users_are_allowed_even_against_a_deny() -> None:
    a = authorizer(acl("*", op=Op.ALL, perm=Perm.DENY, principal="User:*"), super_users="User:admin; User:ops")
    assert decide(a, principal="User:admin") is ALLOWED
    assert decide(a, principal="User:ops", op=Op.ALTER, rtype=Res.CLUSTER, name="kafka-cluster") is ALLOWED
    assert decide(a) is DENIED
    assert a.is_super_user("User:admin") and not a.is_super_user(ALICE)


def test_parse_super_users() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users(None) == frozenset()
    assert parse_super_users("User:a;User:b ;;") == {"User:a", "User:b"}


def test_cluster_mirror_resources() -> None:
    a = authorizer(acl("prod-dr", op=Op.DESCRIBE, rtype=Res.CLUSTER_MIRROR),
                   acl("*", op=Op.CREATE, rtype=Res.CLUSTER_MIRROR, principal=BOB))
    assert decide(a, op=Op.DESCRIBE, rtype=Res.CLUSTER_MIRROR, name="prod-dr") is ALLOWED
    assert decide(a, op=Op.DESCRIBE, rtype=Res.CLUSTER_MIRROR, name="other") is DENIED
    assert decide(a, op=Op.ALTER, rtype=Res.CLUSTER_MIRROR, name="prod-dr") is DENIED
    assert decide(a, op=Op.CREATE, rtype=Res.CLUSTER_MIRROR, name="any", principal=BOB) is ALLOWED
    assert decide(a, op=Op.DESCRIBE, rtype=Res.TOPIC, name="prod-dr") is DENIED


def test_update_replaces_the_bindings() -> None:
    first = acl()
    a = authorizer(first)
    assert decide(a) is ALLOWED
    a.update({})
    assert decide(a) is DENIED
    deny = acl(perm=Perm.DENY)
    a.update({first.id: first, deny.id: deny})
    assert decide(a) is DENIED


def test_authorize_by_resource_type() -> None:
    def any_write(*bindings: AclBinding, **kw: object) -> AuthorizationResult:
        return authorizer(*bindings, **kw).authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)  # type: ignore[arg-type]

    assert any_write() is DENIED
    assert any_write(allow_everyone=True) is ALLOWED
    assert any_write(super_users="User:alice") is ALLOWED
    assert any_write(acl("t", op=Op.WRITE)) is ALLOWED
    assert any_write(acl("t", op=Op.ALL)) is ALLOWED
    assert any_write(acl("t", op=Op.READ)) is DENIED
    assert any_write(acl("t", op=Op.WRITE, principal=BOB)) is DENIED
    assert any_write(acl("t", op=Op.WRITE, rtype=Res.GROUP)) is DENIED
    # an allow dominated by a deny of the same literal, of a prefix of it, or of `*`
    assert any_write(acl("t", op=Op.WRITE), acl("t", op=Op.WRITE, perm=Perm.DENY)) is DENIED
    assert any_write(acl("tx", op=Op.WRITE), acl("t", op=Op.WRITE, perm=Perm.DENY, pattern=Pat.PREFIXED)) is DENIED
    assert any_write(acl("p", op=Op.WRITE, pattern=Pat.PREFIXED), acl("*", op=Op.WRITE, perm=Perm.DENY)) is DENIED
    # a deny of another name leaves the allow standing
    assert any_write(acl("t", op=Op.WRITE), acl("u", op=Op.WRITE, perm=Perm.DENY)) is ALLOWED


def rule(a: StandardAuthorizer, op: Op = Op.READ, name: str = "orders", principal: str = ALICE) -> str:
    return str(a.matching_rule(principal, HOST, op, Res.TOPIC, name))


def test_the_matching_rule_names_why_as_kafka_does() -> None:
    """Kafka's MatchingRule texts: the `based on rule ...` of its audit log."""
    allow, deny = acl("orders", op=Op.READ), acl("ord", op=Op.READ, perm=Perm.DENY, pattern=Pat.PREFIXED)
    assert rule(authorizer(allow)) == (
        "MatchingAcl(acl=StandardAcl[resourceType=TOPIC, resourceName=orders, patternType=LITERAL, "
        "principal=User:alice, host=*, operation=READ, permissionType=ALLOW])")
    # the deny that applies, whatever allows beside it
    assert rule(authorizer(allow, deny)) == (
        "MatchingAcl(acl=StandardAcl[resourceType=TOPIC, resourceName=ord, patternType=PREFIXED, "
        "principal=User:alice, host=*, operation=READ, permissionType=DENY])")
    assert rule(authorizer(allow, super_users="User:alice")) == "SuperUser"
    assert rule(authorizer()) == "DefaultDeny"
    assert rule(authorizer(allow_everyone=True)) == "DefaultAllow"
    # the resource has bindings, none of them alice's: denied whatever allow.everyone says
    assert rule(authorizer(allow, allow_everyone=True), principal=BOB) == "DefaultDeny"


def test_the_matching_rule_carries_the_decision() -> None:
    allow = acl(op=Op.WRITE)
    a = authorizer(allow, super_users="User:admin")
    assert a.matching_rule(ALICE, HOST, Op.WRITE, Res.TOPIC, "orders") == MatchingAclRule(allow, ALLOWED)
    assert a.matching_rule(ALICE, HOST, Op.READ, Res.TOPIC, "orders") == DefaultRule(DENIED)
    assert a.matching_rule("User:admin", HOST, Op.READ, Res.TOPIC, "orders") == SuperUserRule()
    # DESCRIBE implied by WRITE names the WRITE binding
    assert a.matching_rule(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "orders") == MatchingAclRule(allow, ALLOWED)


def test_acl_count_is_the_bindings_decided_over() -> None:
    a = authorizer(acl(), acl("x"))
    assert a.acl_count == 2
    a.update({})
    assert a.acl_count == 0
