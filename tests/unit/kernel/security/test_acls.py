"""Kafka's ACL decisions: DENY wins, implied DESCRIBE, patterns, wildcards, super users."""

from __future__ import annotations

import pytest

from headwater_kernel.security.acls import (
    AclBinding,
    Authorizer,
    InvalidAclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from headwater_kernel.security.principals import (
    ANONYMOUS,
    InvalidPrincipalError,
    Principal,
)

ALICE = Principal.user("alice")
BOB = Principal.user("bob")
TOPIC = ResourceType.TOPIC
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(
    name: str,
    operation: Operation,
    permission: Permission = ALLOW,
    principal: Principal = ALICE,
    pattern: PatternType = PatternType.LITERAL,
    resource: ResourceType = TOPIC,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, pattern), principal, operation, permission, host
    )


def test_no_acl_means_no_access() -> None:
    assert not Authorizer([]).authorize(ALICE, Operation.READ, TOPIC, "orders")


@pytest.mark.parametrize(
    ("granted", "asked", "allowed"),
    [
        (Operation.READ, Operation.READ, True),
        (Operation.READ, Operation.WRITE, False),
        (Operation.READ, Operation.DESCRIBE, True),  # implied
        (Operation.WRITE, Operation.DESCRIBE, True),
        (Operation.DELETE, Operation.DESCRIBE, True),
        (Operation.ALTER, Operation.DESCRIBE, True),
        (Operation.DESCRIBE, Operation.READ, False),  # implication runs one way
        (Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS, True),
        (Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, False),
        (Operation.CREATE, Operation.DESCRIBE, False),
        (Operation.ALL, Operation.ALTER_CONFIGS, True),
    ],
)
def test_allows_and_implied_operations(granted: Operation, asked: Operation, allowed: bool) -> None:
    authorizer = Authorizer([acl("orders", granted)])
    assert authorizer.authorize(ALICE, asked, TOPIC, "orders") is allowed


def test_deny_wins_over_any_allow() -> None:
    authorizer = Authorizer([acl("*", Operation.ALL), acl("orders", Operation.WRITE, DENY)])
    assert not authorizer.authorize(ALICE, Operation.WRITE, TOPIC, "orders")
    assert authorizer.authorize(ALICE, Operation.READ, TOPIC, "orders")  # only WRITE denied
    assert authorizer.authorize(ALICE, Operation.WRITE, TOPIC, "payments")
    deny_all = Authorizer([acl("orders", Operation.READ), acl("orders", Operation.ALL, DENY)])
    assert not deny_all.authorize(ALICE, Operation.READ, TOPIC, "orders")
    assert not deny_all.authorize(ALICE, Operation.DESCRIBE, TOPIC, "orders")


def test_a_denied_read_does_not_deny_the_describe_a_write_implies() -> None:
    authorizer = Authorizer([acl("t", Operation.WRITE), acl("t", Operation.READ, DENY)])
    assert authorizer.authorize(ALICE, Operation.DESCRIBE, TOPIC, "t")
    assert not authorizer.authorize(ALICE, Operation.READ, TOPIC, "t")


def test_literal_prefixed_and_wildcard_patterns() -> None:
    authorizer = Authorizer(
        [
            acl("orders", Operation.READ),
            acl("logs.", Operation.READ, pattern=PatternType.PREFIXED),
            acl("*", Operation.DESCRIBE, principal=BOB),
        ]
    )
    assert authorizer.authorize(ALICE, Operation.READ, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, Operation.READ, TOPIC, "orders2")  # literal is exact
    assert authorizer.authorize(ALICE, Operation.READ, TOPIC, "logs.app")
    assert not authorizer.authorize(ALICE, Operation.READ, TOPIC, "logs")
    assert authorizer.authorize(BOB, Operation.DESCRIBE, TOPIC, "anything")
    assert not authorizer.authorize(BOB, Operation.DESCRIBE, ResourceType.GROUP, "anything")


def test_every_user_wildcard_never_covers_anonymous() -> None:
    authorizer = Authorizer([acl("t", Operation.READ, principal=Principal.user("*"))])
    assert authorizer.authorize(ALICE, Operation.READ, TOPIC, "t")
    assert authorizer.authorize(BOB, Operation.READ, TOPIC, "t")
    assert not authorizer.authorize(ANONYMOUS, Operation.READ, TOPIC, "t")


def test_hosts_restrict_where_a_binding_applies() -> None:
    authorizer = Authorizer([acl("t", Operation.READ, host="10.0.0.5")])
    assert authorizer.authorize(ALICE, Operation.READ, TOPIC, "t", host="10.0.0.5")
    assert not authorizer.authorize(ALICE, Operation.READ, TOPIC, "t", host="10.0.0.6")


def test_super_users_may_do_anything_even_denied() -> None:
    authorizer = Authorizer([acl("t", Operation.ALL, DENY, principal=BOB)], super_users=[BOB])
    assert authorizer.authorize(BOB, Operation.DELETE, ResourceType.CLUSTER, "kafka-cluster")
    assert authorizer.authorize(BOB, Operation.READ, TOPIC, "t")


def test_registry_resources_sit_beside_kafkas() -> None:
    authorizer = Authorizer(
        [
            acl(
                "orders-",
                Operation.WRITE,
                pattern=PatternType.PREFIXED,
                resource=ResourceType.SUBJECT,
            )
        ]
    )
    assert authorizer.authorize(ALICE, Operation.WRITE, ResourceType.SUBJECT, "orders-value")
    assert not authorizer.authorize(ALICE, Operation.WRITE, TOPIC, "orders-value")


@pytest.mark.parametrize("text", ["alice", "User:", ":alice", "Group:ops", ""])
def test_principals_are_user_and_a_name(text: str) -> None:
    with pytest.raises(InvalidPrincipalError):
        Principal.parse(text)


def test_principal_names_may_hold_colons() -> None:
    assert Principal.parse("User:CN=a:b") == Principal("User", "CN=a:b")
    assert str(Principal.parse("User:alice")) == "User:alice"


def test_patterns_that_cannot_match_are_refused() -> None:
    with pytest.raises(InvalidAclError):
        ResourcePattern(TOPIC, "*", PatternType.PREFIXED)
    with pytest.raises(InvalidAclError):
        ResourcePattern(TOPIC, "")
