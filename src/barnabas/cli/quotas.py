"""`barnabas quotas`: client quotas (describe, alter) with DescribeClientQuotas and AlterClientQuotas (KIP-546).

As ``kafka-configs.sh --entity-type users|clients|ips --describe`` and ``--alter --add-config
producer_byte_rate=1048576 --delete-config request_percentage``, with kafka-configs.sh's entity
options: ``--user NAME`` or ``--user-defaults``, ``--client NAME`` or ``--client-defaults``, ``--ip
ADDRESS`` or ``--ip-defaults``; a user and a client together name a (user, client-id) entity.

Rules this module keeps (Kafka's ConfigCommand):

- ``describe`` with entities shows only entities of exactly those types (ClientQuotaFilter.containsOnly);
  ``--entity-type users`` matches any named user; with no entity at all it shows every quota.
- ``alter`` refuses, before anything is sent, a key that is not a quota of the entity's kind, a value
  that is not a finite number, and removing a quota the entity does not have (Kafka's "Invalid
  config(s)"). The broker judges the rest (a value not above 0, a fraction for a byte rate, an ip
  with a user) and its refusal is one line: the entity, Kafka's error name, its message.
- librdkafka has no client-quota API: the requests (version 0, which every broker with these APIs
  takes) go to the first bootstrap server over barnabas's own client (``_wire.ask``). Any broker
  answers: quotas live in coordination.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ._client import action_parser, add_connection
from ._wire import ask
from .broker import without_test_data_generators
from .errors import CliError

DESCRIBE, ALTER = 48, 49
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
USER, CLIENT_ID, IP = "user", "client-id", "ip"
#: kafka-configs.sh's entity type names -> the protocol's.
ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID, "ips": IP}
#: The quotas each kind of entity takes (Kafka's QuotaConfig: user and client-id quotas, ip quotas).
CLIENT_QUOTAS = ("consumer_byte_rate", "controller_mutation_rate", "producer_byte_rate", "request_percentage")
IP_QUOTAS = ("connection_creation_rate",)
#: An entity: (type, name or None for the default) pairs in user, client-id, ip order.
Entity = tuple[tuple[str, str | None], ...]


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("quotas", help="client quotas: describe, alter")
    add_connection(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = action_parser(actions, "describe", help="quotas of the entities named (none named: every quota)")
    _entity_options(describe)
    describe.add_argument("--entity-type", action="append", default=[], choices=sorted(ENTITY_TYPES),
                          help="any named entity of this type (repeatable)")  # fmt: skip
    describe.add_argument("--json", action="store_true", help="print JSON")
    alter = action_parser(actions, "alter", help="set or remove an entity's quotas")
    _entity_options(alter)
    alter.add_argument("--add-config", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                       help="quotas to set, e.g. producer_byte_rate=1048576 (repeatable)")  # fmt: skip
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY[,KEY]",
                       help="quotas to remove (repeatable)")  # fmt: skip
    alter.add_argument("--validate-only", action="store_true", help="have the broker check the change, not make it")
    parser.set_defaults(run=run)


def _entity_options(parser: argparse.ArgumentParser) -> None:
    for kind, flag in ((USER, "--user"), (CLIENT_ID, "--client"), (IP, "--ip")):
        names = (flag, "--client-id") if kind == CLIENT_ID else (flag,)
        group = parser.add_mutually_exclusive_group()
        group.add_argument(*names, dest=kind.replace("-", "_"), metavar="NAME", help=f"a named {kind}")
        group.add_argument(f"{flag}-defaults", dest=f"{kind.replace('-', '_')}_defaults", action="store_true",
                           help=f"the default {kind}")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    without_test_data_generators()  # a short command: hypothesis would be most of its start
    return _describe(args) if args.action == "describe" else _alter(args)


# -- options into Kafka's terms -----------------------------------------------------------------


def _entity(args: argparse.Namespace) -> Entity:
    """The entity the options name: (type, name or None for the default) for each type given."""
    entity = []
    for kind in (USER, CLIENT_ID, IP):
        name, default = getattr(args, kind.replace("-", "_")), getattr(args, f"{kind.replace('-', '_')}_defaults")
        if name is not None and not name:
            raise CliError(f"the {kind} name is empty (--{kind.split('-')[0]}-defaults names the default {kind})")
        if name is not None or default:
            entity.append((kind, name))
    return tuple(entity)


def _describe_entity(entity: Entity) -> str:
    """``user alice, client-id app`` or ``the default user``."""
    return ", ".join(f"{kind} {name}" if name is not None else f"the default {kind}" for kind, name in entity)


def _additions(items: list[str], keys: tuple[str, ...], entity: Entity) -> dict[str, float]:
    """``--add-config`` items as quota -> value, checked as kafka-configs.sh checks them."""
    added: dict[str, float] = {}
    for item in (part.strip() for given in items for part in given.split(",")):
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"--add-config {item!r}: expected KEY=VALUE")
        _known(key, keys, entity)
        try:
            value = float(text)
        except ValueError:
            raise CliError(f"--add-config {key}={text}: not a number") from None
        if not math.isfinite(value):
            raise CliError(f"--add-config {key}={text}: not a finite number")
        added[key] = value
    return added


def _deletions(items: list[str], keys: tuple[str, ...], entity: Entity) -> list[str]:
    deleted = [key for key in (part.strip() for given in items for part in given.split(",")) if key]
    for key in deleted:
        _known(key, keys, entity)
    return list(dict.fromkeys(deleted))


def _known(key: str, keys: tuple[str, ...], entity: Entity) -> None:
    if key not in keys:
        raise CliError(f"unknown quota {key!r} for {_describe_entity(entity)} (one of {', '.join(keys)})")


def _exactly(entity: Entity) -> list[tuple[str, int, str | None]]:
    """DescribeClientQuotas filter components for this entity: each name exactly, or the default."""
    return [(kind, MATCH_EXACT if name is not None else MATCH_DEFAULT, name) for kind, name in entity]


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value


# -- actions ------------------------------------------------------------------------------------


def _described(
    args: argparse.Namespace, components: list[tuple[str, int, str | None]]
) -> list[tuple[Entity, dict[str, float]]]:
    """DescribeClientQuotas: each matching entity with its quotas (key -> value)."""
    from barnabas.protocol import request_class

    component = request_class(DESCRIBE, 0, "ComponentData")
    body = request_class(DESCRIBE, 0)(
        components=tuple(component(entity_type=k, match_type=m, match=n) for k, m, n in components),
        strict=bool(components),
    )
    response = ask(args, DESCRIBE, body)
    if response.error_code != 0:
        raise CliError(f"{response.error_code.name.upper()}: {response.error_message}")
    order = {kind: i for i, kind in enumerate((USER, CLIENT_ID, IP))}
    found = []
    for entry in response.entries or ():
        entity = tuple(sorted(((e.entity_type, e.entity_name) for e in entry.entity), key=lambda e: order.get(e[0], 3)))
        found.append((entity, {value.key: float(value.value) for value in entry.values}))
    return sorted(found, key=lambda item: [(k, n or "") for k, n in item[0]])


def _describe(args: argparse.Namespace) -> int:
    named = _entity(args)
    components = _exactly(named)
    for entity_type in dict.fromkeys(args.entity_type):
        kind = ENTITY_TYPES[entity_type]
        if any(kind == k for k, _ in named):
            raise CliError(f"--entity-type {entity_type} and a {kind} named: give one")
        components.append((kind, MATCH_SPECIFIED, None))
    found = _described(args, components)
    if args.json:
        quotas = [{"entity": dict(entity), "quotas": values} for entity, values in found]
        print(json.dumps({"quotas": quotas}, indent=2))
    elif not found:
        print("no client quotas")
    for entity, values in [] if args.json else found:
        listed = ", ".join(f"{key}={_number(value)}" for key, value in sorted(values.items()))
        print(f"{_describe_entity(entity)}: {listed}")
    return 0


def _alter(args: argparse.Namespace) -> int:
    from barnabas.protocol import request_class

    entity = _entity(args)
    if not entity:
        raise CliError("name an entity: --user, --client, --ip or their -defaults")
    keys = IP_QUOTAS if any(kind == IP for kind, _ in entity) else CLIENT_QUOTAS
    added = _additions(args.add_config, keys, entity)
    deleted = _deletions(args.delete_config, keys, entity)
    if not added and not deleted:
        raise CliError("nothing to change: give --add-config or --delete-config")
    if deleted:
        _check_set(args, entity, deleted)
    op, entity_data, entry = (request_class(ALTER, 0, name) for name in ("OpData", "EntityData", "EntryData"))
    ops = [op(key=key, value=value, remove=False) for key, value in added.items()]
    ops += [op(key=key, value=0.0, remove=True) for key in deleted]
    components = tuple(entity_data(entity_type=kind, entity_name=name) for kind, name in entity)
    body = request_class(ALTER, 0)(
        entries=(entry(entity=components, ops=tuple(ops)),), validate_only=args.validate_only
    )
    for result in ask(args, ALTER, body).entries:
        if result.error_code != 0:
            raise CliError(f"{_describe_entity(entity)}: {result.error_code.name.upper()}: {result.error_message}")
    changes = [f"{key}={_number(value)}" for key, value in added.items()] + [f"{key} removed" for key in deleted]
    checked = " (validated only: nothing changed)" if args.validate_only else ""
    print(f"{_describe_entity(entity)}: {', '.join(changes)}{checked}")
    return 0


def _check_set(args: argparse.Namespace, entity: Entity, deleted: list[str]) -> None:
    """Refuse to remove quotas the entity does not have, as kafka-configs.sh does."""
    current = next((values for found, values in _described(args, _exactly(entity)) if found == entity), {})
    missing = [key for key in deleted if key not in current]
    if missing:
        raise CliError(f"{_describe_entity(entity)} has no quota {', '.join(missing)} to remove")
