"""Authorization settings: Kafka's ``authorizer.class.name``, ``super.users``, ``allow.everyone.if.no.acl.found``.

Rules this module keeps:

- Authorization is on when ``authorizer.class.name`` names Kafka's own ACL authorizer: the
  KRaft one (``org.apache.kafka.metadata.authorizer.StandardAuthorizer``) or the ZooKeeper-era
  one (``kafka.security.authorizer.AclAuthorizer``); both mean barnabas's ACLs, which behave as
  StandardAuthorizer does. Empty (Kafka's default) is off. Any other class stops the broker with
  a one-line reason: barnabas cannot load a Java plugin, and serving without it would be serving
  with less protection than configured.
- ``super.users`` is Kafka's semicolon-separated list of principals (``User:admin;User:broker``),
  each ``type:name``; blanks around them and empty items are ignored, as StandardAuthorizer does.
"""

from __future__ import annotations

from .definitions import ConfigDef, ConfigType

__all__ = ["ACL_AUTHORIZERS", "AUTHORIZER_CONFIG_LIST", "parse_super_users"]

#: The class names that turn barnabas's ACLs on.
ACL_AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")


def _authorizer_problem(value: str) -> str | None:
    if not value or value in ACL_AUTHORIZERS:
        return None
    return (
        f"{value!r} cannot be loaded; barnabas serves Kafka's ACLs with {ACL_AUTHORIZERS[0]} (or {ACL_AUTHORIZERS[1]})"
    )


def parse_super_users(value: str | None) -> frozenset[str]:
    """The principals ``super.users`` names, as ``type:name`` strings (StandardAuthorizer's getConfiguredSuperUsers).

    Raises:
        ValueError: an item is not ``type:name`` (Kafka's message).
    """
    users = set()
    for item in (value or "").split(";"):
        principal = item.strip()
        if not principal:
            continue
        if ":" not in principal:
            raise ValueError(f"expected a string in format principalType:principalName but got {principal}")
        users.add(principal)
    return frozenset(users)


def _super_users_problem(value: str) -> str | None:
    try:
        parse_super_users(value)
    except ValueError as exc:
        return str(exc)
    return None


AUTHORIZER_CONFIG_LIST: tuple[ConfigDef, ...] = (
    ConfigDef("authorizer.class.name", ConfigType.STRING, "",
              f"The authorizer; {ACL_AUTHORIZERS[0]} turns ACLs on, empty leaves every request allowed.",
              _authorizer_problem),
    ConfigDef("super.users", ConfigType.STRING, None,
              "Semicolon-separated principals allowed everything whatever the ACLs (User:admin;User:broker).",
              _super_users_problem),
    ConfigDef("allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, False,
              "Allow a request on a resource no ACL names (off: only ACLs and super users allow anything)."),
)  # fmt: skip
