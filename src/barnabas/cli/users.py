"""`barnabas users`: SCRAM users (add, list, delete) with AlterUserScramCredentials and DescribeUserScramCredentials.

As ``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=…]' --entity-type
users``: the password never leaves this process. It is salted here (a random 32-byte salt) and run
through PBKDF2 for the iterations asked; the broker gets the salt and the salted password and stores
only the keys derived from them. The password is read from the terminal without echo, or the first
line of standard input when that is not a terminal (never from the command line, where ``ps``
shows it).

librdkafka has no API for these requests: they go over barnabas's own Kafka client to the first
bootstrap server (``_wire.ask``), with the connection settings librdkafka would take from
``--command-config`` and ``-X``. Any broker answers: credentials live in coordination and every
broker's watch takes a change up at once.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from ._client import action_parser, add_connection, positive_int
from ._wire import ask
from .errors import CliError

DESCRIBE, ALTER = 50, 51
MECHANISM_NAMES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser("users", help="SCRAM users: add, list, delete")
    add_connection(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = action_parser(actions, "add", help="add a user, or set a new password (read from the terminal or stdin)")
    add.add_argument("name")
    add.add_argument("--mechanism", "-m", choices=MECHANISM_NAMES, default="SCRAM-SHA-256", help="default %(default)s")
    add.add_argument(
        "--iterations", "-i", type=positive_int, default=4096, help="PBKDF2 iterations, 4096 to 16384 (default 4096)"
    )
    listing = action_parser(actions, "list", help="users and their mechanisms (no names: every user)")
    listing.add_argument("names", nargs="*", metavar="NAME")
    listing.add_argument("--json", action="store_true", help="print JSON")
    delete = action_parser(actions, "delete", help="delete a user's credential for a mechanism")
    delete.add_argument("name")
    delete.add_argument(
        "--mechanism", "-m", choices=MECHANISM_NAMES, default="SCRAM-SHA-256", help="default %(default)s"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "add":
        return _add(args)
    if args.action == "list":
        return _list(args)
    return _delete(args)


def _read_password(name: str) -> str:
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {name}: ")
        if getpass.getpass("again: ") != password:
            raise CliError("the passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CliError("the password is empty")
    return password


def _add(args: argparse.Namespace) -> int:
    import secrets

    from barnabas.protocol import request_class
    from barnabas.security.scram import MECHANISMS, salted_password

    if not args.name:
        raise CliError("the user name is empty")
    mechanism = MECHANISMS[args.mechanism]
    password = _read_password(args.name)
    salt = secrets.token_bytes(32)
    upsertion = request_class(ALTER, 0, "ScramCredentialUpsertion")(
        name=args.name, mechanism=mechanism.type_id, iterations=args.iterations, salt=salt,
        salted_password=salted_password(mechanism, password, salt, args.iterations),
    )  # fmt: skip
    _altered(ask(args, ALTER, request_class(ALTER, 0)(deletions=(), upsertions=(upsertion,))))
    print(f"user {args.name}: {args.mechanism} credential set ({args.iterations} iterations)")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from barnabas.protocol import request_class
    from barnabas.security.scram import MECHANISMS

    deletion = request_class(ALTER, 0, "ScramCredentialDeletion")(
        name=args.name, mechanism=MECHANISMS[args.mechanism].type_id
    )
    _altered(ask(args, ALTER, request_class(ALTER, 0)(deletions=(deletion,), upsertions=())))
    print(f"user {args.name}: {args.mechanism} credential deleted")
    return 0


def _altered(response: Any) -> None:
    for result in response.results:
        if result.error_code != 0:
            raise CliError(f"user {result.user}: {result.error_code.name}: {result.error_message}")


def _list(args: argparse.Namespace) -> int:
    from barnabas.protocol import request_class
    from barnabas.security.scram import MECHANISMS

    by_type = {mechanism.type_id: name for name, mechanism in MECHANISMS.items()}
    user_name = request_class(DESCRIBE, 0, "UserName")
    users = tuple(user_name(name=name) for name in args.names) or None
    response = ask(args, DESCRIBE, request_class(DESCRIBE, 0)(users=users))
    if response.error_code != 0:
        raise CliError(f"{response.error_code.name}: {response.error_message}")
    found: dict[str, dict[str, int]] = {}
    missing = []
    for result in response.results:
        if result.error_code != 0:
            missing.append(f"{result.user}: {result.error_code.name}")
            continue
        found[result.user] = {by_type.get(int(i.mechanism), str(i.mechanism)): int(i.iterations)
                              for i in result.credential_infos}  # fmt: skip
    if args.json:
        print(json.dumps({"users": found, "errors": missing}, indent=2))
    else:
        for user, mechanisms in found.items():
            listed = ", ".join(f"{name} ({iterations} iterations)" for name, iterations in mechanisms.items())
            print(f"{user}\t{listed}")
        if not found and not missing:
            print("no SCRAM users")
    if missing:
        raise CliError("; ".join(missing))
    return 0
