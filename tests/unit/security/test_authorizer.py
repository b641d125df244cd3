"""The authorizer against Kafka's own cases: StandardAuthorizerTest, AuthorizerTest and BaseAuthorizerTest."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError, load_broker_config
from barnabas.config.authorizer import parse_super_users
from barnabas.security.acl import (
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from barnabas.security.authorizer import Authorizer

O, R, P = AclOperation, ResourceType, PatternType  # noqa: E741 - Kafka's enums, short as in its tests
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
LOCAL = "127.0.0.1"


class Acls:
    """An authorizer and the ACLs given to it, added and removed as Kafka's tests do."""

    def __init__(self, super_users: tuple[str, ...] = ("User:superman",), *, allow_if_no_acl: bool = False) -> None:
        self.authorizer = Authorizer(super_users, allow_if_no_acl=allow_if_no_acl)
        self.by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}

    def add(
        self, resource_type: ResourceType, name: str, pattern_type: PatternType, *entries: AccessControlEntry
    ) -> None:
        pattern = ResourcePattern(resource_type, name, pattern_type)
        self.by_pattern.setdefault(pattern, set()).update(entries)
        self.authorizer.set_entries(pattern, self.by_pattern[pattern])

    def remove(
        self, resource_type: ResourceType, name: str, pattern_type: PatternType, *entries: AccessControlEntry
    ) -> None:
        pattern = ResourcePattern(resource_type, name, pattern_type)
        self.by_pattern[pattern] -= set(entries)
        self.authorizer.set_entries(pattern, self.by_pattern[pattern])

    def check(self, user: str, *actions: tuple[AclOperation, ResourceType, str], host: str = LOCAL) -> list[bool]:
        return [self.authorizer.authorize(f"User:{user}", host, op, rt, name) for op, rt, name in actions]

    def by_type(self, user: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        return self.authorizer.authorize_by_resource_type(f"User:{user}", host, operation, resource_type)


def ace(
    principal: str, operation: AclOperation, permission: AclPermissionType, host: str = WILDCARD
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


# -- StandardAuthorizerTest ---------------------------------------------------------------------


def test_configured_super_users() -> None:
    assert parse_super_users(None) == frozenset()
    assert parse_super_users(" ") == frozenset()
    assert parse_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(ValueError, match=r"expected a string in format principalType:principalName but got bob$"):
        parse_super_users("bob;:alice")


def test_authorizer_settings_load_and_refuse_other_classes() -> None:
    config = load_broker_config(overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:alice;User:chris", "allow.everyone.if.no.acl.found": "true",
    }, environ={})  # fmt: skip
    assert config["super.users"] == "User:alice;User:chris"
    assert config["allow.everyone.if.no.acl.found"] is True
    assert load_broker_config(environ={})["allow.everyone.if.no.acl.found"] is False
    load_broker_config(overrides={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, environ={})
    with pytest.raises(ConfigError, match=r"^authorizer\.class\.name: 'com.example.Custom' cannot be loaded"):
        load_broker_config(overrides={"authorizer.class.name": "com.example.Custom"}, environ={})
    with pytest.raises(ConfigError, match=r"super\.users: expected a string in format"):
        load_broker_config(overrides={"super.users": "bob"}, environ={})


@pytest.mark.parametrize(("allow_if_no_acl", "expected"), [(True, [False, True]), (False, [False, False])])
def test_allow_everyone_if_no_acl_found(allow_if_no_acl: bool, expected: list[bool]) -> None:
    acls = Acls(("User:alice", "User:chris"), allow_if_no_acl=allow_if_no_acl)
    acls.add(R.TOPIC, "topic1", LITERAL, ace("User:Alice", O.READ, ALLOW))
    assert acls.check("Bob", (O.READ, R.TOPIC, "topic1"), (O.READ, R.TOPIC, "topic2")) == expected


def foo_acl(operation: AclOperation, permission: AclPermissionType) -> Acls:
    acls = Acls()
    acls.add(R.TOPIC, "foo_", PREFIXED, ace("User:bob", operation, permission))
    return acls


@pytest.mark.parametrize("operation", [O.DESCRIBE, O.READ, O.WRITE, O.DELETE, O.ALTER])
def test_allow_implies_describe(operation: AclOperation) -> None:
    assert foo_acl(operation, ALLOW).check("bob", (O.DESCRIBE, R.TOPIC, "foo_bar")) == [True]


def test_create_does_not_imply_describe_and_deny_implies_nothing() -> None:
    assert foo_acl(O.CREATE, ALLOW).check("bob", (O.DESCRIBE, R.TOPIC, "foo_bar")) == [False]
    for operation in (O.READ, O.WRITE, O.DELETE, O.ALTER):
        # a DENY for READ does not deny DESCRIBE, and, being the only ACL, leaves nothing allowed
        acls = foo_acl(operation, DENY)
        acls.add(R.TOPIC, "foo_", PREFIXED, ace("User:bob", O.DESCRIBE, ALLOW))
        assert acls.check("bob", (O.DESCRIBE, R.TOPIC, "foo_bar")) == [True]
    assert foo_acl(O.DESCRIBE, DENY).check("bob", (O.DESCRIBE, R.TOPIC, "foo_bar")) == [False]


def test_describe_configs_implication() -> None:
    for operation in (O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS):
        assert foo_acl(operation, ALLOW).check("bob", (O.DESCRIBE_CONFIGS, R.TOPIC, "foo_bar")) == [True]
    acls = foo_acl(O.ALTER_CONFIGS, DENY)
    acls.add(R.TOPIC, "foo_", PREFIXED, ace("User:bob", O.DESCRIBE_CONFIGS, ALLOW))
    assert acls.check("bob", (O.DESCRIBE_CONFIGS, R.TOPIC, "foo_bar"), (O.ALTER_CONFIGS, R.TOPIC, "foo_bar")) == [
        True,
        False,
    ]


def test_principal_matching() -> None:
    acls = foo_acl(O.READ, ALLOW)
    assert acls.check("bob", (O.READ, R.TOPIC, "foo_bar")) == [True]
    assert acls.check("alice", (O.READ, R.TOPIC, "foo_bar")) == [False]
    acls.add(R.GROUP, "bar", LITERAL, ace("User:*", O.READ, DENY), ace("User:alice", O.READ, ALLOW))
    assert acls.check("alice", (O.READ, R.GROUP, "bar")) == [False]


def test_list_acls() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "foo_", PREFIXED, ace("User:bob", O.READ, ALLOW), ace("User:bob", O.WRITE, ALLOW))
    acls.add(R.GROUP, "bar", LITERAL, ace("User:*", O.DESCRIBE_CONFIGS, DENY), ace("User:*", O.ALTER_CONFIGS, DENY))
    assert len(acls.authorizer.acls()) == 4
    acls.remove(R.TOPIC, "foo_", PREFIXED, ace("User:bob", O.WRITE, ALLOW))
    assert len(acls.authorizer) == 3
    topic_acls = acls.authorizer.acls(AclBindingFilter(R.TOPIC, None, P.ANY))
    assert topic_acls == [AclBinding(ResourcePattern(R.TOPIC, "foo_", PREFIXED), ace("User:bob", O.READ, ALLOW))]


def test_simple_authorizations() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "foo_", PREFIXED, ace("User:bob", O.READ, ALLOW), ace("User:bob", O.WRITE, ALLOW))
    acls.add(R.GROUP, "bar", LITERAL, ace("User:*", O.DESCRIBE_CONFIGS, ALLOW), ace("User:*", O.ALTER_CONFIGS, ALLOW))
    assert acls.check("bob", (O.READ, R.TOPIC, "foo_")) == [True]
    assert acls.check("fred", (O.ALTER_CONFIGS, R.GROUP, "bar")) == [True]


def test_deny_precedence_with_operation_all() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "foo", LITERAL, ace("User:alice", O.ALL, DENY), ace("User:*", O.ALL, DENY))
    acls.add(R.TOPIC, "foo", PREFIXED, ace("User:alice", O.READ, ALLOW), ace("User:*", O.DESCRIBE, ALLOW))
    actions = [
        (O.WRITE, R.TOPIC, "foo"),
        (O.READ, R.TOPIC, "foo"),
        (O.DESCRIBE, R.TOPIC, "foo"),
        (O.READ, R.TOPIC, "foobar"),
    ]
    assert acls.check("alice", *actions) == [False, False, False, True]
    actions = [(O.DESCRIBE, R.TOPIC, "foo"), (O.READ, R.TOPIC, "foo"), (O.WRITE, R.TOPIC, "foo"),
               (O.DESCRIBE, R.TOPIC, "foobaz"), (O.READ, R.TOPIC, "foobaz")]  # fmt: skip
    assert acls.check("bob", *actions) == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "foo", LITERAL, ace("User:*", O.ALL, ALLOW))
    acls.add(R.TOPIC, "bar", PREFIXED, ace("User:alice", O.ALL, ALLOW))
    acls.add(R.TOPIC, "baz", LITERAL, ace("User:bob", O.ALL, ALLOW))
    assert acls.check("alice", (O.WRITE, R.TOPIC, "foo"), (O.DESCRIBE_CONFIGS, R.TOPIC, "bar"),
                      (O.DESCRIBE, R.TOPIC, "baz")) == [True, True, False]  # fmt: skip
    assert acls.check("bob", (O.WRITE, R.TOPIC, "foo"), (O.READ, R.TOPIC, "bar"),
                      (O.DESCRIBE, R.TOPIC, "baz")) == [True, False, True]  # fmt: skip
    assert acls.check("malory", (O.DESCRIBE, R.TOPIC, "foo"), (O.WRITE, R.TOPIC, "bar"),
                      (O.READ, R.TOPIC, "baz")) == [True, False, False]  # fmt: skip


def test_host_address_acl_validation() -> None:
    host1, host2 = "192.168.1.1", "192.168.1.2"
    acls = Acls()
    acls.add(R.TOPIC, "foo", LITERAL, ace("User:alice", O.READ, DENY, host1), ace("User:alice", O.READ, ALLOW))
    acls.add(R.TOPIC, "bar", LITERAL, ace("User:bob", O.READ, ALLOW, host2), ace("User:*", O.DESCRIBE, ALLOW, LOCAL))
    actions = [(O.READ, R.TOPIC, "foo"), (O.READ, R.TOPIC, "bar"), (O.DESCRIBE, R.TOPIC, "bar")]
    assert acls.check("alice", *actions, host=LOCAL) == [True, False, True]
    assert acls.check("alice", *actions, host=host1) == [False, False, False]
    assert acls.check("alice", *actions, host=host2) == [True, False, False]
    assert acls.check("bob", *actions, host=LOCAL) == [False, False, True]
    assert acls.check("bob", *actions, host=host1) == [False, False, False]
    assert acls.check("bob", *actions, host=host2) == [False, True, True]


def many_acls() -> Acls:
    acls = Acls()
    acls.add(R.TOPIC, "green2", LITERAL, ace("User:*", O.READ, ALLOW))
    acls.add(R.TOPIC, "green", PREFIXED, ace("User:bob", O.READ, ALLOW))
    acls.add(R.TOPIC, "betamax4", LITERAL, ace("User:bob", O.READ, ALLOW))
    acls.add(R.TOPIC, "betamax", LITERAL, ace("User:bob", O.READ, ALLOW))
    acls.add(R.TOPIC, "beta", PREFIXED, ace("User:*", O.READ, ALLOW))
    acls.add(R.TOPIC, "alpha", PREFIXED, ace("User:*", O.READ, ALLOW))
    acls.add(R.TOPIC, "alp", PREFIXED, ace("User:bob", O.READ, DENY))
    acls.add(R.GROUP, "*", LITERAL, ace("User:bob", O.WRITE, ALLOW))
    acls.add(R.GROUP, "wheel", LITERAL, ace("User:*", O.WRITE, DENY))
    return acls


def test_authorization_with_many_acls() -> None:
    acls = many_acls()
    assert acls.check("bob", (O.READ, R.TOPIC, "green1"), (O.WRITE, R.GROUP, "wheel")) == [True, False]
    assert acls.check("bob", (O.READ, R.TOPIC, "alpha"), (O.WRITE, R.GROUP, "arbitrary"),
                      (O.READ, R.TOPIC, "ala")) == [False, True, False]  # fmt: skip


def test_super_users_may_do_anything() -> None:
    acls = many_acls()
    acls.add(R.TOPIC, "*", LITERAL, ace("User:*", O.ALL, DENY))
    assert acls.check("superman", (O.READ, R.TOPIC, "green1"), (O.WRITE, R.GROUP, "wheel")) == [True, True]
    assert acls.check("bob", (O.READ, R.TOPIC, "green1")) == [False]


def test_prefix_acls() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "fooa", PREFIXED, ace("User:alice", O.ALL, ALLOW))
    acls.add(R.TOPIC, "foobar", LITERAL, ace("User:bob", O.ALL, ALLOW))
    acls.add(R.TOPIC, "f", PREFIXED, ace("User:bob", O.ALL, ALLOW))
    assert acls.check("bob", (O.WRITE, R.TOPIC, "foobarr"), (O.READ, R.TOPIC, "goobar"),
                      (O.READ, R.TOPIC, "fooa")) == [True, False, True]  # fmt: skip
    assert acls.check("alice", (O.DESCRIBE, R.TOPIC, "fooa"), (O.WRITE, R.TOPIC, "bar"),
                      (O.READ, R.TOPIC, "baz")) == [True, False, False]  # fmt: skip


def test_a_changed_acl_is_decided_afresh() -> None:
    """Decisions are remembered; a change to the ACLs forgets them."""
    acls = Acls()
    assert acls.check("bob", (O.READ, R.TOPIC, "t")) == [False]
    acls.add(R.TOPIC, "t", LITERAL, ace("User:bob", O.READ, ALLOW))
    assert acls.check("bob", (O.READ, R.TOPIC, "t")) == [True]
    acls.authorizer.load({})
    assert acls.check("bob", (O.READ, R.TOPIC, "t")) == [False]


# -- AuthorizerTest -----------------------------------------------------------------------------


def test_topic_acl() -> None:
    host1, host2 = "192.168.1.1", "192.168.1.2"
    acls = Acls()
    alice = [ace("User:alice", O.READ, ALLOW, host1), ace("User:alice", O.READ, ALLOW, host2),
             ace("User:alice", O.READ, DENY, host1), ace("User:alice", O.WRITE, ALLOW, host1),
             ace("User:alice", O.DESCRIBE, ALLOW)]  # fmt: skip
    acls.add(R.TOPIC, "topic", LITERAL, *alice, ace("User:rob", O.READ, ALLOW), ace("User:batman", O.WRITE, ALLOW))
    topic = "topic"
    assert acls.check("alice", (O.READ, R.TOPIC, topic), (O.WRITE, R.TOPIC, topic), host=host2) == [True, False]
    assert acls.check("alice", (O.READ, R.TOPIC, topic), (O.WRITE, R.TOPIC, topic), host=host1) == [False, True]
    assert acls.check("alice", (O.DESCRIBE, R.TOPIC, topic), (O.ALTER, R.TOPIC, topic), host=host1) == [True, False]
    assert acls.check("alice", (O.DESCRIBE, R.TOPIC, topic), (O.ALTER, R.TOPIC, topic), host=host2) == [True, False]
    assert acls.check("rob", (O.DESCRIBE, R.TOPIC, topic), (O.READ, R.TOPIC, topic), host=host1) == [True, True]
    assert acls.check("batman", (O.DESCRIBE, R.TOPIC, topic), (O.WRITE, R.TOPIC, topic), host=host1) == [True, True]


def test_deny_takes_precedence_and_allow_all() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "t", LITERAL, ace("User:*", O.ALL, ALLOW), ace("User:alice", O.ALL, DENY, "192.168.2.1"))
    assert acls.check("alice", (O.READ, R.TOPIC, "t"), host="192.168.2.1") == [False]
    assert acls.check("random", (O.READ, R.TOPIC, "t"), host="192.0.4.4") == [True]


def test_wildcard_acls() -> None:
    acls = Acls()
    host = "192.168.3.1"
    assert acls.check("alice", (O.READ, R.TOPIC, "t"), host=host) == [False]  # no ACLs: fail closed
    acls.add(R.TOPIC, "*", LITERAL, ace("User:alice", O.READ, ALLOW, host))
    assert acls.check("alice", (O.READ, R.TOPIC, "t"), host=host) == [True]
    acls.add(R.TOPIC, "t", LITERAL, ace("User:alice", O.WRITE, ALLOW, host))
    acls.add(R.TOPIC, "*", LITERAL, ace("User:alice", O.WRITE, DENY, host))
    assert acls.check("alice", (O.WRITE, R.TOPIC, "t"), host=host) == [False]


def test_single_character_resource_acls() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "f", LITERAL, ace("User:alice", O.READ, ALLOW))
    assert acls.check("alice", (O.READ, R.TOPIC, "f"), (O.READ, R.TOPIC, "foo")) == [True, False]
    acls.add(R.TOPIC, "_", PREFIXED, ace("User:alice", O.READ, ALLOW))
    assert acls.check("alice", (O.READ, R.TOPIC, "_foo"), (O.READ, R.TOPIC, "_"), (O.READ, R.TOPIC, "foo_")) == [
        True,
        True,
        False,
    ]


# -- BaseAuthorizerTest: authorizeByResourceType --------------------------------------------------

H1, H2 = "192.168.1.1", "192.168.1.2"


def test_by_resource_type_multiple_add_and_remove() -> None:
    acls = Acls()
    deny_read, allow_read = ace("User:user1", O.READ, DENY, H1), ace("User:user1", O.READ, ALLOW, H1)
    for _ in range(3):
        assert not acls.by_type("user1", H1, O.READ, R.TOPIC)
        acls.add(R.TOPIC, "sb1", LITERAL, allow_read)
        assert acls.by_type("user1", H1, O.READ, R.TOPIC)
        acls.add(R.TOPIC, "sb1", LITERAL, deny_read)
        assert not acls.by_type("user1", H1, O.READ, R.TOPIC)
        acls.remove(R.TOPIC, "sb1", LITERAL, deny_read)
        assert acls.by_type("user1", H1, O.READ, R.TOPIC)
        acls.remove(R.TOPIC, "sb1", LITERAL, allow_read)


def test_by_resource_type_unrelated_deny_does_not_dominate_allow() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "sb1", LITERAL, ace("User:user1", O.READ, DENY, H1), ace("User:user2", O.READ, DENY, H1),
             ace("User:user1", O.WRITE, DENY, H2), ace("User:user2", O.READ, DENY, H2),
             ace("User:user1", O.READ, ALLOW, H2))  # fmt: skip
    acls.add(R.TOPIC, "sb2", LITERAL, ace("User:user1", O.READ, DENY, H2))
    acls.add(R.GROUP, "s", PREFIXED, ace("User:user1", O.READ, DENY, H2))
    for resource_type in (R.TOPIC, R.GROUP, R.TRANSACTIONAL_ID, R.CLUSTER):
        assert not acls.by_type("user1", H1, O.READ, resource_type)
    assert acls.by_type("user1", H2, O.READ, R.TOPIC)


def test_by_resource_type_prefixed_deny_dominates() -> None:
    acls = Acls()
    allow, deny = ace("User:user1", O.READ, ALLOW, H1), ace("User:user1", O.READ, DENY, H1)
    steps = [
        ("abcde", allow, True),
        ("abcd", deny, False),
        ("abc", allow, True),
        ("a", deny, False),
        ("ab", allow, False),
    ]
    for name, entry, expected in steps:
        acls.add(R.GROUP, name, PREFIXED, entry)
        assert acls.by_type("user1", H1, O.READ, R.GROUP) is expected, name


def test_by_resource_type_wildcard_deny_dominates() -> None:
    acls = Acls()
    allow, deny = ace("User:user1", O.WRITE, ALLOW, H1), ace("User:user1", O.WRITE, DENY, H1)
    acls.add(R.GROUP, "hello", PREFIXED, allow)
    assert acls.by_type("user1", H1, O.WRITE, R.GROUP)
    acls.add(R.GROUP, "*", LITERAL, deny)
    assert not acls.by_type("user1", H1, O.WRITE, R.GROUP)
    acls.add(R.GROUP, "*", LITERAL, allow)
    acls.add(R.GROUP, "aloha", LITERAL, allow)
    assert not acls.by_type("user1", H1, O.WRITE, R.GROUP)


def test_by_resource_type_with_all_operation_and_super_user() -> None:
    acls = Acls()
    assert not acls.by_type("user1", H1, O.READ, R.TOPIC)
    acls.add(R.TOPIC, "sb1", LITERAL, ace("User:user1", O.WRITE, DENY, H1), ace("User:user1", O.ALL, ALLOW, H1))
    assert acls.by_type("user1", H1, O.READ, R.TOPIC)
    acls.add(R.TOPIC, "sb1", LITERAL, ace("User:user1", O.ALL, DENY, H1))
    assert not acls.by_type("user1", H1, O.READ, R.TOPIC)
    acls.add(R.TOPIC, "*", LITERAL, ace("User:*", O.ALL, DENY))
    assert acls.by_type("superman", H1, O.READ, R.TOPIC)


def test_by_resource_type_no_acl_found_override() -> None:
    assert Acls(allow_if_no_acl=True).by_type("user1", H1, O.READ, R.TOPIC)
    assert not Acls().by_type("user1", H1, O.READ, R.TOPIC)


def test_authorized_operations_bit_field() -> None:
    acls = Acls()
    acls.add(R.TOPIC, "t", LITERAL, ace("User:bob", O.READ, ALLOW))
    field = acls.authorizer.authorized_operations("User:bob", LOCAL, R.TOPIC, "t")
    assert field == (1 << O.READ) | (1 << O.DESCRIBE)
    assert acls.authorizer.authorized_operations("User:superman", LOCAL, R.GROUP, "g") == sum(
        1 << op for op in (O.READ, O.DESCRIBE, O.DELETE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS)
    )
