"""ACL bindings and filters: Kafka's ResourcePatternFilter and AccessControlEntryFilter, and its validation."""

from __future__ import annotations

import pytest

from barnabas.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    creation_problem,
    filter_problem,
)

O, R, P = AclOperation, ResourceType, PatternType  # noqa: E741 - Kafka's enums, short as in its tests
ALLOW = AclPermissionType.ALLOW


def binding(name: str, pattern_type: PatternType = P.LITERAL, resource_type: ResourceType = R.TOPIC) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type), AccessControlEntry("User:bob", "*", O.READ, ALLOW)
    )


@pytest.mark.parametrize(
    ("acl_filter", "name", "pattern_type", "expected"),
    [
        (AclBindingFilter(), "foo", P.LITERAL, True),
        (AclBindingFilter(R.TOPIC, "foo", P.LITERAL), "foo", P.LITERAL, True),
        (AclBindingFilter(R.TOPIC, "foo", P.LITERAL), "foo", P.PREFIXED, False),
        (AclBindingFilter(R.GROUP, None, P.ANY), "foo", P.LITERAL, False),
        (AclBindingFilter(R.TOPIC, "foo", P.ANY), "foo", P.PREFIXED, True),
        (AclBindingFilter(R.TOPIC, "foo", P.ANY), "*", P.LITERAL, False),
        # MATCH finds every ACL that applies to the named resource
        (AclBindingFilter(R.TOPIC, "foobar", P.MATCH), "foobar", P.LITERAL, True),
        (AclBindingFilter(R.TOPIC, "foobar", P.MATCH), "*", P.LITERAL, True),
        (AclBindingFilter(R.TOPIC, "foobar", P.MATCH), "foo", P.PREFIXED, True),
        (AclBindingFilter(R.TOPIC, "foobar", P.MATCH), "foo", P.LITERAL, False),
        (AclBindingFilter(R.TOPIC, "foobar", P.MATCH), "foobarbaz", P.PREFIXED, False),
    ],
)
def test_pattern_filters(acl_filter: AclBindingFilter, name: str, pattern_type: PatternType, expected: bool) -> None:
    assert acl_filter.matches(binding(name, pattern_type)) is expected


def test_entry_filters() -> None:
    acl = binding("foo")
    assert AclBindingFilter(principal="User:bob", host="*", operation=O.READ, permission=ALLOW).matches(acl)
    assert not AclBindingFilter(principal="User:alice").matches(acl)
    assert not AclBindingFilter(host="10.0.0.1").matches(acl)
    assert not AclBindingFilter(operation=O.WRITE).matches(acl)
    assert not AclBindingFilter(permission=AclPermissionType.DENY).matches(acl)


def test_codes_kafka_does_not_know_are_unknown() -> None:
    assert ResourceType.of(99) is R.UNKNOWN
    assert AclOperation.of(3) is O.READ
    assert AclOperation.named("ClusterAction") is O.CLUSTER_ACTION
    assert AclOperation.named("describe-configs") is O.DESCRIBE_CONFIGS
    with pytest.raises(ValueError, match="unknown AclOperation"):
        AclOperation.named("Fly")


@pytest.mark.parametrize(
    ("acl", "problem"),
    [
        (binding("foo"), None),
        (binding("foo", P.PREFIXED), None),
        (binding("kafka-cluster", resource_type=R.CLUSTER), None),
        (binding("foo", resource_type=R.ANY), "Invalid resourceType ANY"),
        (binding("foo", P.MATCH), "Invalid patternType MATCH"),
        (binding("foo", P.ANY), "Invalid patternType ANY"),
        (binding("other", resource_type=R.CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (binding(""), "Resource name should not be empty"),
        (
            AclBinding(ResourcePattern(R.TOPIC, "t", P.LITERAL), AccessControlEntry("User:bob", "*", O.ANY, ALLOW)),
            "Invalid operation ANY",
        ),
        (
            AclBinding(
                ResourcePattern(R.TOPIC, "t", P.LITERAL),
                AccessControlEntry("User:bob", "*", O.READ, AclPermissionType.ANY),
            ),
            "Invalid permissionType ANY",
        ),
        (
            AclBinding(ResourcePattern(R.TOPIC, "t", P.LITERAL), AccessControlEntry("bob", "*", O.READ, ALLOW)),
            "expected a string in format principalType:principalName but got bob",
        ),
    ],
)
def test_creation_problems(acl: AclBinding, problem: str | None) -> None:
    assert creation_problem(acl) == problem


def test_filter_problems() -> None:
    assert filter_problem(AclBindingFilter()) is None
    assert filter_problem(AclBindingFilter(resource_type=R.UNKNOWN, operation=O.UNKNOWN)) == (
        "Unknown resource type, operation in the ACL filter"
    )
