"""Kafka's ACL model, pure: principals, resources, patterns, operations, and the decision.

A binding says that ``principal`` connecting from ``host`` is ALLOWed or DENYed ``operation`` on
the resources of one type matched by a pattern: LITERAL (that name; ``*`` is every name) or
PREFIXED (every name starting with it). :meth:`Authorizer.authorize` decides one request as Kafka
does:

- a super user is allowed everything;
- a matching DENY wins over any ALLOW (DENY ALL denies every operation);
- otherwise a matching ALLOW allows: of the operation itself, of ALL, or of one that implies it
  (DESCRIBE is implied by READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS);
- no matching binding: denied. Once authorization is on, no ACL means no access.

Principals are ``User:<name>``; ``User:*`` in a binding matches every user (never the anonymous
one unless said so). Hosts are client addresses, ``*`` for any. The registry's resources (Subject,
Registry) sit beside Kafka's.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from headwater_kernel.security.principals import Principal


class ResourceType(enum.StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"
    SUBJECT = "SUBJECT"
    REGISTRY = "REGISTRY"


class PatternType(enum.StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(enum.StrEnum):
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"


class Permission(enum.StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


WILDCARD = "*"
"""A LITERAL resource name matching every resource of its type; a host matching every host."""

CLUSTER_NAME = "kafka-cluster"
"""The one Cluster resource's name, as Kafka names it."""

# Which operations an ALLOW of the key also allows (Kafka's implied operations).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


class InvalidAclError(ValueError):
    """A binding that cannot be stored as given (an ALL pattern on a name, an empty name...)."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidAclError("a resource pattern needs a name ('*' for every resource)")
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD:
            raise InvalidAclError("a PREFIXED pattern of '*' matches nothing; use LITERAL '*'")

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == WILDCARD or self.name == name


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One access control entry on one resource pattern."""

    pattern: ResourcePattern
    principal: Principal
    operation: Operation
    permission: Permission
    host: str = WILDCARD

    def applies_to(self, principal: Principal, host: str) -> bool:
        return self.principal.matches(principal) and self.host in (WILDCARD, host)


class Authorizer:
    """Decides requests against a set of bindings and the super users.

    Built afresh from the cluster metadata whenever the bindings change (the set is immutable), so
    a decision never sees half an update. Lookups index bindings by resource type.
    """

    def __init__(self, bindings: Iterable[AclBinding], super_users: Iterable[Principal] = ()):
        self.bindings = tuple(bindings)
        self.super_users = frozenset(super_users)
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in self.bindings:
            self._by_type.setdefault(binding.pattern.resource_type, []).append(binding)

    def authorize(
        self,
        principal: Principal,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        host: str = WILDCARD,
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the named resource."""
        if principal in self.super_users:
            return True
        allowed = False
        for binding in self._by_type.get(resource_type, ()):
            if not binding.pattern.matches(resource_type, name):
                continue
            if not binding.applies_to(principal, host):
                continue
            if binding.permission is Permission.DENY:
                if binding.operation in (operation, Operation.ALL):
                    return False
            elif binding.operation in (operation, Operation.ALL) or (
                binding.operation in _IMPLIED_BY.get(operation, ())
            ):
                allowed = True
        return allowed
