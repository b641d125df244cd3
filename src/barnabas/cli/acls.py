"""`barnabas acls`: create, list and delete ACLs (Kafka's kafka-acls.sh --add, --list, --remove).

The options are kafka-acls.sh's: ``--allow-principal``/``--deny-principal`` (``User:alice``,
repeatable), ``--allow-host``/``--deny-host`` (default ``*``), ``--operation`` (Kafka's names, any
case: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs,
IdempotentWrite, All; repeatable, default All), the resources ``--topic``, ``--group``,
``--transactional-id`` (repeatable) and ``--cluster``, and ``--resource-pattern-type`` (literal
or prefixed to create; any, match, literal or prefixed to list and delete). ``list`` takes
``--principal`` to show one principal's ACLs and ``--json``. ``delete`` needs a resource, so a
slip never removes every ACL of the cluster.

The requests go through confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls) with
the connection settings of ``--command-config`` and ``-X``; a refusal (CLUSTER_AUTHORIZATION_FAILED
without ALTER on the cluster, SECURITY_DISABLED on a broker without an authorizer) is one line and
exit code 1.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._client import action_parser, add_connection, connect_admin
from .errors import CliError

CLUSTER_NAME = "kafka-cluster"
CREATE_PATTERNS = ("literal", "prefixed")
FILTER_PATTERNS = ("any", "match", "literal", "prefixed")


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("acls", help="ACLs: create, list, delete")
    add_connection(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = action_parser(actions, "create", help="allow or deny principals operations on resources")
    _resources(create, CREATE_PATTERNS, "literal")
    _entries(create)
    listing = action_parser(actions, "list", help="ACLs (no resource: every ACL)")
    _resources(listing, FILTER_PATTERNS, "any")
    listing.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                         help="only this principal's ACLs (repeatable)")  # fmt: skip
    listing.add_argument("--json", action="store_true", help="print JSON")
    delete = action_parser(actions, "delete", help="delete the ACLs of resources (all, or those matching)")
    _resources(delete, FILTER_PATTERNS, "any")
    _entries(delete, operation_default="Any")
    parser.set_defaults(run=run)


def _resources(parser: argparse.ArgumentParser, patterns: tuple[str, ...], default: str) -> None:
    parser.add_argument("--topic", action="append", default=[], metavar="NAME", help="a topic (repeatable)")
    parser.add_argument("--group", action="append", default=[], metavar="NAME", help="a consumer group (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                        help="a transactional id (repeatable)")  # fmt: skip
    parser.add_argument("--cluster", action="store_true", help="the cluster")
    parser.add_argument("--resource-pattern-type", choices=patterns, default=default, type=str.lower,
                        help="how resource names match (default %(default)s)")  # fmt: skip


def _entries(parser: argparse.ArgumentParser, *, operation_default: str = "All") -> None:
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="a principal to allow, as User:NAME (repeatable)")  # fmt: skip
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="a principal to deny, as User:NAME (repeatable)")  # fmt: skip
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="a host the allowed principals connect from (repeatable; default *)")  # fmt: skip
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                        help="a host the denied principals connect from (repeatable; default *)")  # fmt: skip
    parser.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                        help=f"Read, Write, Describe, All, ... (repeatable; default {operation_default})")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.action == "create":
        return _create(args)
    if args.action == "list":
        return _list(args)
    return _delete(args)


# -- options into Kafka's terms -----------------------------------------------------------------


def _enum(kind: Any, name: str, what: str) -> Any:
    wanted = name.replace("_", "").replace("-", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted and member.name not in ("UNKNOWN",):
            return member
    raise CliError(f"unknown {what} {name!r}")


def _resource_list(args: argparse.Namespace) -> list[tuple[Any, str]]:
    from confluent_kafka.admin import ResourceType

    found = [(ResourceType.TOPIC, name) for name in args.topic]
    found += [(ResourceType.GROUP, name) for name in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.BROKER, CLUSTER_NAME))
    if any(not name for _, name in found):
        raise CliError("a resource name is empty")
    return found


def _operations(args: argparse.Namespace, default: str) -> list[Any]:
    from confluent_kafka.admin import AclOperation

    return [_enum(AclOperation, name, "operation") for name in args.operation or [default]]


def _principals(args: argparse.Namespace) -> list[tuple[str, str, Any]]:
    """(principal, host, ALLOW or DENY) of every entry the options ask for."""
    from confluent_kafka.admin import AclPermissionType

    entries: list[tuple[str, str, Any]] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        for principal in principals:
            if ":" not in principal:
                raise CliError(f"principal {principal!r}: expected TYPE:NAME, as User:alice")
            entries.extend((principal, host, permission) for host in hosts or ["*"])
    return entries


def _pattern(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import ResourcePatternType

    return ResourcePatternType[args.resource_pattern_type.upper()]


# -- actions ------------------------------------------------------------------------------------


def _create(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AclBinding

    resources, entries = _resource_list(args), _principals(args)
    if not resources:
        raise CliError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not entries:
        raise CliError("name a principal: --allow-principal or --deny-principal")
    bindings = [
        AclBinding(resource_type, name, _pattern(args), principal, host, operation, permission)
        for resource_type, name in resources
        for principal, host, permission in entries
        for operation in _operations(args, "All")
    ]
    admin = connect_admin(args)
    for binding, future in admin.create_acls(bindings, request_timeout=args.timeout).items():
        try:
            future.result(args.timeout)
        except KafkaException as exc:
            raise CliError(f"{_describe(binding)}: {_refusal(exc)}") from None
        print(f"created {_describe(binding)}")
    return 0


def _filters(args: argparse.Namespace, *, with_entries: bool) -> list[Any]:
    """DescribeAcls/DeleteAcls filters: each resource (or any), each principal's entry (or any)."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourceType

    make_filter: Any = AclBindingFilter  # None matches anything (its stubs say str)

    resources: list[tuple[Any, str | None]] = [*_resource_list(args)] or [(ResourceType.ANY, None)]
    entries: list[tuple[str | None, str | None, Any]]
    if with_entries:
        hosts_given = bool(args.allow_host or args.deny_host)
        entries = [(p, host if hosts_given else None, permission) for p, host, permission in _principals(args)]
        operations = _operations(args, "Any")
    else:
        entries = [(p, None, AclPermissionType.ANY) for p in args.principal]
        operations = [AclOperation.ANY]
    return [
        make_filter(resource_type, name, _pattern(args), principal, host, operation, permission)
        for resource_type, name in resources
        for principal, host, permission in entries or [(None, None, AclPermissionType.ANY)]
        for operation in operations
    ]


def _list(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = connect_admin(args)
    found: dict[Any, Any] = {}
    for acl_filter in _filters(args, with_entries=False):
        try:
            bindings = admin.describe_acls(acl_filter, request_timeout=args.timeout).result(args.timeout)
        except KafkaException as exc:
            raise CliError(_refusal(exc)) from None
        found.update((_key(b), b) for b in bindings)
    ordered = [found[key] for key in sorted(found)]
    if args.json:
        print(json.dumps({"acls": [_as_dict(b) for b in ordered]}, indent=2))
    elif not ordered:
        print("no ACLs")
    for binding in [] if args.json else ordered:
        print(_describe(binding))
    return 0


def _delete(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    if not _resource_list(args):
        raise CliError("name a resource: --topic, --group, --transactional-id or --cluster")
    admin = connect_admin(args)
    deleted = 0
    for future in admin.delete_acls(_filters(args, with_entries=True), request_timeout=args.timeout).values():
        try:
            bindings = future.result(args.timeout)
        except KafkaException as exc:
            raise CliError(_refusal(exc)) from None
        for binding in bindings:
            print(f"deleted {_describe(binding)}")
        deleted += len(bindings)
    if not deleted:
        print("no ACL matched")
    return 0


def _refusal(exc: Any) -> str:
    """Kafka's error name and message (``CLUSTER_AUTHORIZATION_FAILED: …``) from a KafkaException."""
    error = exc.args[0] if exc.args else exc
    if hasattr(error, "name") and hasattr(error, "str"):
        return f"{error.name()}: {error.str()}"
    return str(error)


def _key(binding: Any) -> tuple[Any, ...]:
    return (binding.restype.value, binding.name, binding.resource_pattern_type.value, binding.principal, binding.host,
            binding.operation.value, binding.permission_type.value)  # fmt: skip


def _as_dict(binding: Any) -> dict[str, str]:
    resource_type = "CLUSTER" if binding.restype.name == "BROKER" else binding.restype.name
    return {
        "resource_type": resource_type, "name": binding.name, "pattern_type": binding.resource_pattern_type.name,
        "principal": binding.principal, "host": binding.host, "operation": binding.operation.name,
        "permission": binding.permission_type.name,
    }  # fmt: skip


def _describe(binding: Any) -> str:
    acl = _as_dict(binding)
    return (f"{acl['permission']} {acl['principal']} from {acl['host']}: {acl['operation']} on "
            f"{acl['resource_type']} {acl['name']} ({acl['pattern_type']})")  # fmt: skip
