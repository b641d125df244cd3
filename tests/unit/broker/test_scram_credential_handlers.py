"""DescribeUserScramCredentials and AlterUserScramCredentials on a broker in memory: Kafka's answers and errors.

The credential store is checked too: what lands in coordination is the salt, StoredKey and
ServerKey, never the salted password; SaslHandshake and SaslAuthenticate off a SASL listener are
ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from barnabas.protocol import ErrorCode, request_class
from barnabas.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, credential_from_salted, salted_password
from tests.unit.broker.in_memory import InMemoryBroker, in_memory_broker

T = TypeVar("T")
DESCRIBE, ALTER, SASL_HANDSHAKE, SASL_AUTHENTICATE = 50, 51, 17, 36
SALT = b"0123456789abcdef0123456789abcdef"


def run(tmp_path: Path, scenario: Callable[[InMemoryBroker], Awaitable[T]]) -> T:
    async def main() -> T:
        async with in_memory_broker(tmp_path) as broker:
            return await scenario(broker)

    return asyncio.run(asyncio.wait_for(main(), 60))


def upsertion(name: str, mechanism: int = 1, iterations: int = 4096, password: str = "secret", **overrides: Any) -> Any:
    scram = SCRAM_SHA_256 if mechanism != 2 else SCRAM_SHA_512
    fields = {
        "name": name, "mechanism": mechanism, "iterations": iterations, "salt": SALT,
        "salted_password": salted_password(scram, password, SALT, max(iterations, 1)), **overrides,
    }  # fmt: skip
    return request_class(ALTER, 0, "ScramCredentialUpsertion")(**fields)


def deletion(name: str, mechanism: int = 1) -> Any:
    return request_class(ALTER, 0, "ScramCredentialDeletion")(name=name, mechanism=mechanism)


async def alter(broker: InMemoryBroker, upsertions: tuple[Any, ...] = (), deletions: tuple[Any, ...] = ()) -> list[Any]:
    response = await broker.call(ALTER, 0, request_class(ALTER, 0)(deletions=deletions, upsertions=upsertions))
    return [(r.user, r.error_code, r.error_message) for r in response.results]


async def describe(broker: InMemoryBroker, *names: str | None) -> list[Any]:
    user_name = request_class(DESCRIBE, 0, "UserName")
    users = None if names == (None,) else tuple(user_name(name=n) for n in names)
    response = await broker.call(DESCRIBE, 0, request_class(DESCRIBE, 0)(users=users))
    assert response.error_code == ErrorCode.none
    return [
        (r.user, r.error_code, [(int(i.mechanism), int(i.iterations)) for i in r.credential_infos])
        for r in response.results
    ]


def test_users_are_added_described_and_deleted(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        assert await alter(broker, (upsertion("alice"), upsertion("alice", 2, 8192), upsertion("bob"))) == [
            ("alice", ErrorCode.none, None), ("bob", ErrorCode.none, None)
        ]  # fmt: skip
        everyone = [("alice", ErrorCode.none, [(1, 4096), (2, 8192)]), ("bob", ErrorCode.none, [(1, 4096)])]
        assert await describe(broker) == everyone
        assert await describe(broker, None) == everyone
        assert await describe(broker, "bob", "nobody", "alice", "alice") == [
            ("bob", ErrorCode.none, [(1, 4096)]), ("nobody", ErrorCode.resource_not_found, []),
            ("alice", ErrorCode.duplicate_resource, []),
        ]  # fmt: skip
        assert await alter(broker, deletions=(deletion("alice", 2),)) == [("alice", ErrorCode.none, None)]
        assert await describe(broker, "alice") == [("alice", ErrorCode.none, [(1, 4096)])]
        credential = broker.state.node.credentials.scram_credential(SCRAM_SHA_256, "bob")
        salted = salted_password(SCRAM_SHA_256, "secret", SALT, 4096)
        assert credential == credential_from_salted(SCRAM_SHA_256, salted, SALT, 4096)
        stored = await broker.state.node.storage.list("credentials/")
        assert sorted(stored) == ["credentials/scram/SCRAM-SHA-256/alice", "credentials/scram/SCRAM-SHA-256/bob"]
        for versioned in stored.values():
            assert sorted(json.loads(versioned.value)) == ["iterations", "salt", "server_key", "stored_key"]
            assert salted.hex() not in versioned.value.decode() and b"secret" not in versioned.value

    run(tmp_path, scenario)


def test_kafkas_errors_and_a_failing_user_changes_nothing(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        results = await alter(
            broker,
            (
                upsertion("few", iterations=4095), upsertion("many", iterations=16385), upsertion("odd", mechanism=3),
                upsertion("", mechanism=1), upsertion("twice"), upsertion("twice"), upsertion("ok"),
                upsertion("nosalt", salt=b""), upsertion("short", salted_password=b"x" * 16),
                upsertion("mixed"),
            ),
            (deletion("ghost"), deletion("mixed", 2)),
        )  # fmt: skip
        assert {user: (error, message) for user, error, message in results} == {
            "ghost": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
            "mixed": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
            "few": (ErrorCode.unacceptable_credential, "Too few iterations: 4095 (at least 4096)"),
            "many": (ErrorCode.unacceptable_credential, "Too many iterations: 16385 (at most 16384)"),
            "odd": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
            "twice": (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
            "ok": (ErrorCode.none, None),
            "nosalt": (ErrorCode.unacceptable_credential, "The salt must not be empty"),
            "short": (ErrorCode.unacceptable_credential, "The salted password must be 32 bytes for SCRAM-SHA-256"),
        }
        assert await describe(broker) == [("ok", ErrorCode.none, [(1, 4096)])], "mixed's upsertion did not land"

    run(tmp_path, scenario)


def test_sasl_requests_off_a_sasl_listener_are_an_illegal_state(tmp_path: Path) -> None:
    async def scenario(broker: InMemoryBroker) -> None:
        handshake = await broker.call(SASL_HANDSHAKE, 1, request_class(SASL_HANDSHAKE, 1)(mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.illegal_sasl_state
        token = request_class(SASL_AUTHENTICATE, 2)(auth_bytes=b"\0a\0b")
        assert (await broker.call(SASL_AUTHENTICATE, 2, token)).error_code == ErrorCode.illegal_sasl_state

    run(tmp_path, scenario)
