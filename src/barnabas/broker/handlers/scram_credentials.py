"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM users (KIP-554).

Kafka's errors, per user (results name each user once, in the order the request first names them):

- Describe: no names (null or empty) lists every user with credentials; a name asked twice is
  DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND.
- Alter: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM; an empty name, fewer than 4096 or more
  than 16384 iterations, an empty salt or a salted password of the wrong length UNACCEPTABLE_CREDENTIAL;
  a user and mechanism named twice in the request DUPLICATE_RESOURCE; deleting a credential that
  does not exist RESOURCE_NOT_FOUND. A user with any error has none of its alterations applied;
  the others' are, each user's in one commit.
- The client sends the salted password and salt (the password never leaves it); the broker stores
  only StoredKey and ServerKey derived from them (``barnabas.cluster.credentials``). The change is
  in this broker's cache when the answer goes, and reaches the others by their watch.

Who may call these (KafkaApis): DESCRIBE on the cluster to describe (else the response's
CLUSTER_AUTHORIZATION_FAILED and no result), ALTER on the cluster to alter (else every user's
CLUSTER_AUTHORIZATION_FAILED). With authorization off every principal may, as in Kafka without an
authorizer: turn authorization on before a SCRAM listener is reachable by untrusted clients.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from barnabas.coordination import CoordinationError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation
from barnabas.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, credential_from_salted
from barnabas.security.scram import MECHANISMS as SCRAM_MECHANISMS

from ..registry import ApiSpec
from ._authorize import cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

__all__ = ["SPECS"]

log = logging.getLogger(__name__)

DESCRIBE_KEY, ALTER_KEY = 50, 51
BY_TYPE = {mechanism.type_id: mechanism for mechanism in SCRAM_MECHANISMS.values()}


@dataclass(frozen=True, slots=True, kw_only=True)
class UserName:
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeUserScramCredentialsRequest:
    users: tuple[UserName, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...]
    upsertions: tuple[ScramCredentialUpsertion, ...]


# -- describe -----------------------------------------------------------------------------------


def describe(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(DESCRIBE_KEY, request.header.api_version)
    names = [user.name for user in view_of(DescribeUserScramCredentialsRequest, request.body).users or ()]
    if not cluster_allowed(state, AclOperation.DESCRIBE):
        response = make(
            types.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed, error_message=None, results=(),
        )  # fmt: skip
        return encode_response(request.header.correlation_id, response)
    known = state.node.credentials.users()
    results = []
    for name in dict.fromkeys(names) if names else known:
        credentials = known.get(name)
        if names.count(name) > 1:
            error, message = ErrorCode.duplicate_resource, "Cannot describe SCRAM credentials for the same user twice"
        elif credentials is None:
            error, message = ErrorCode.resource_not_found, "Attempt to describe a user credential that does not exist"
        else:
            error, message = ErrorCode.none, None
        infos = tuple(
            make(types.CredentialInfo, mechanism=SCRAM_MECHANISMS[mechanism].type_id, iterations=iterations)
            for mechanism, iterations in sorted((credentials or {}).items())
            if error is ErrorCode.none
        )
        results.append(
            make(
                types.DescribeUserScramCredentialsResult,
                user=name,
                error_code=error,
                error_message=message,
                credential_infos=infos,
            )
        )
    response = make(
        types.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        error_message=None, results=tuple(results),
    )  # fmt: skip
    return encode_response(request.header.correlation_id, response)


# -- alter --------------------------------------------------------------------------------------


def _upsertion_problem(upsertion: ScramCredentialUpsertion) -> str | None:
    mechanism = BY_TYPE[upsertion.mechanism]
    if upsertion.iterations < MIN_ITERATIONS:
        return f"Too few iterations: {upsertion.iterations} (at least {MIN_ITERATIONS})"
    if upsertion.iterations > MAX_ITERATIONS:
        return f"Too many iterations: {upsertion.iterations} (at most {MAX_ITERATIONS})"
    if not upsertion.salt:
        return "The salt must not be empty"
    if len(upsertion.salted_password) != mechanism.digest_size:
        return f"The salted password must be {mechanism.digest_size} bytes for {mechanism.name}"
    return None


def _problems(body: AlterUserScramCredentialsRequest) -> dict[str, tuple[ErrorCode, str]]:
    """user -> the first error its alterations have (users without one are left out)."""
    problems: dict[str, tuple[ErrorCode, str]] = {}
    alterations: list[Any] = [*body.deletions, *body.upsertions]
    seen: dict[tuple[str, int], int] = {}
    for alteration in alterations:
        seen[(alteration.name, alteration.mechanism)] = seen.get((alteration.name, alteration.mechanism), 0) + 1
    for alteration in alterations:
        name = alteration.name
        if name in problems:
            continue
        if alteration.mechanism not in BY_TYPE:
            problems[name] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        elif not name:
            problems[name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
        elif seen[(name, alteration.mechanism)] > 1:
            problems[name] = (
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        elif isinstance(alteration, ScramCredentialUpsertion) and (problem := _upsertion_problem(alteration)):
            problems[name] = (ErrorCode.unacceptable_credential, problem)
    return problems


def _changes(body: AlterUserScramCredentialsRequest, user: str) -> dict[str, ScramCredential | None]:
    changes: dict[str, ScramCredential | None] = {}
    for deletion in body.deletions:
        if deletion.name == user:
            changes[BY_TYPE[deletion.mechanism].name] = None
    for upsertion in body.upsertions:
        if upsertion.name == user:
            mechanism = BY_TYPE[upsertion.mechanism]
            changes[mechanism.name] = credential_from_salted(
                mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
            )
    return changes


async def _apply(state: NodeNeeds, body: AlterUserScramCredentialsRequest, user: str) -> tuple[ErrorCode, str | None]:
    try:
        missing = await state.node.credentials.alter(user, _changes(body, user))
    except CoordinationError as exc:
        log.warning("altering the SCRAM credentials of %r failed: %s", user, exc)
        return ErrorCode.unknown_server_error, f"coordination: {exc}"
    if missing:
        return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
    log.info("SCRAM credentials of %r altered", user)
    return ErrorCode.none, None


async def alter(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(ALTER_KEY, request.header.api_version)
    body = view_of(AlterUserScramCredentialsRequest, request.body)
    problems = _problems(body)
    alterations: list[Any] = [*body.deletions, *body.upsertions]
    users = dict.fromkeys(a.name for a in alterations)
    may_alter = cluster_allowed(state, AclOperation.ALTER)
    results = []
    for user in users:
        message: str | None
        if not may_alter:
            error, message = ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
        else:
            error, message = problems[user] if user in problems else await _apply(state, body, user)
        results.append(make(types.AlterUserScramCredentialsResult, user=user, error_code=error, error_message=message))
    response = make(types.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
    return encode_response(request.header.correlation_id, response)


SPECS = [
    ApiSpec(DESCRIBE_KEY, "DescribeUserScramCredentials", 0, 0, describe),
    ApiSpec(ALTER_KEY, "AlterUserScramCredentials", 0, 0, alter),
]
