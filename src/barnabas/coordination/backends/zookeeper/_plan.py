"""A commit as one ZooKeeper ``multi``, and the multi's results as our answer.

Rules (ZooKeeper versions count from 0, ours from 1; ``-1`` matches any version):

============================  ==========================  ==========================================
check                         op on the key               multi operation(s)
============================  ==========================  ==========================================
``Check(k, 0)`` (absent)      ``Put``                     ``create`` (ephemeral if the Put has a session)
``Check(k, 0)``               none                        ``create`` then ``delete``: a ``check`` cannot
                                                          test absence, a ``create`` fails if present
``Check(k, None)`` (present)  ``Put`` / ``Delete`` / none  ``set_data`` / ``delete`` / ``check`` at -1
``Check(k, n)``               ``Put`` / ``Delete`` / none  ``set_data`` / ``delete`` / ``check`` at n-1
============================  ==========================  ==========================================

A ZooKeeper server drops the connection of a request larger than ``jute.maxbuffer`` (1 MiB by
default), which would suspend every session on it; a commit carrying more than ``MAX_COMMIT_BYTES``
of values is refused here instead.

A failed multi reports one error at the operation that failed (the others are rolled back); it names
the key: ``NodeExists`` → KeyExistsError, ``NoNode`` → NoSuchKeyError, ``BadVersion`` →
VersionConflictError. A Put's new version is 1 for a create, else the returned data version + 1.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError, RuntimeInconsistency

from ...api import Check, Delete, Op, Put, Session, check_ops_covered
from ...errors import CoordinationError, KeyExistsError, NoSuchKeyError, VersionConflictError

__all__ = ["MAX_COMMIT_BYTES", "Step", "StepKind", "add_to_transaction", "plan_commit", "versions_or_conflict"]

#: Values per commit, leaving room under the default ``jute.maxbuffer`` for paths and headers.
MAX_COMMIT_BYTES = 1_000_000


class StepKind(enum.Enum):
    CREATE = "create"
    ABSENT = "absent"  # create + delete
    SET = "set"
    DELETE = "delete"
    CHECK = "check"


@dataclass(frozen=True, slots=True)
class Step:
    """What one check (and the op it covers) becomes in the multi."""

    key: str
    kind: StepKind
    zk_version: int = -1
    value: bytes = b""
    session: Session | None = None  # a CREATE of an ephemeral key

    @property
    def width(self) -> int:
        """How many multi operations this step takes."""
        return 2 if self.kind is StepKind.ABSENT else 1


def plan_commit(checks: Sequence[Check], ops: Sequence[Op]) -> list[Step]:
    """One step per check, in the checks' order.

    Raises:
        ValueError: an op without a check (``check_ops_covered``), a negative version, or more
            than ``MAX_COMMIT_BYTES`` of values.
    """
    check_ops_covered(checks, ops)
    size = sum(len(op.value) for op in ops if isinstance(op, Put))
    if size > MAX_COMMIT_BYTES:
        raise ValueError(f"a commit of {size} bytes of values exceeds ZooKeeper's request limit ({MAX_COMMIT_BYTES})")
    op_by_key = {op.key: op for op in ops}
    steps = []
    for check in checks:
        if check.version is not None and check.version < 0:
            raise ValueError(f"Check of {check.key!r} has a negative version {check.version}")
        op = op_by_key.get(check.key)
        if check.version == 0:
            if isinstance(op, Put):
                steps.append(Step(check.key, StepKind.CREATE, value=op.value, session=op.session))
            else:
                steps.append(Step(check.key, StepKind.ABSENT))
            continue
        zk_version = -1 if check.version is None else check.version - 1
        if isinstance(op, Put):
            steps.append(Step(check.key, StepKind.SET, zk_version, op.value))
        elif isinstance(op, Delete):
            steps.append(Step(check.key, StepKind.DELETE, zk_version))
        else:
            steps.append(Step(check.key, StepKind.CHECK, zk_version))
    return steps


def add_to_transaction(transaction: Any, step: Step, path: str) -> None:
    """Append ``step``'s operation(s) to a kazoo ``TransactionRequest``."""
    if step.kind is StepKind.CREATE:
        transaction.create(path, step.value, ephemeral=step.session is not None)
    elif step.kind is StepKind.ABSENT:
        transaction.create(path, b"")
        transaction.delete(path)
    elif step.kind is StepKind.SET:
        transaction.set_data(path, step.value, step.zk_version)
    elif step.kind is StepKind.DELETE:
        transaction.delete(path, step.zk_version)
    else:
        transaction.check(path, step.zk_version)


def versions_or_conflict(steps: Sequence[Step], results: Sequence[Any]) -> dict[str, int]:
    """The new version of each put key, from the multi's per-operation results.

    Raises:
        VersionConflictError: (or its KeyExistsError / NoSuchKeyError) for the key that failed.
        CoordinationError: ZooKeeper refused the multi for another reason.
    """
    if sum(step.width for step in steps) != len(results):
        raise CoordinationError(f"commit: {len(results)} results for {sum(s.width for s in steps)} operations")
    owners = [step for step in steps for _ in range(step.width)]
    for step, result in zip(owners, results, strict=True):
        if isinstance(result, RolledBackError | RuntimeInconsistency):
            continue  # rolled back because another operation failed
        if isinstance(result, NodeExistsError):
            raise KeyExistsError(step.key)
        if isinstance(result, NoNodeError):
            raise NoSuchKeyError(step.key)
        if isinstance(result, BadVersionError):
            raise VersionConflictError(step.key)
        if isinstance(result, Exception):
            raise CoordinationError(f"commit refused at {step.key!r}: {type(result).__name__}") from result
    if any(isinstance(result, Exception) for result in results):
        raise CoordinationError("commit rolled back without a failing operation")
    versions: dict[str, int] = {}
    for step, result in zip(owners, results, strict=True):
        if step.kind is StepKind.CREATE:
            versions[step.key] = 1
        elif step.kind is StepKind.SET:
            versions[step.key] = int(result.version) + 1
    return versions
