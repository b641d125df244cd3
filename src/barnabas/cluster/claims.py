"""A broker's claim on its disks: broker id ↔ cluster id ↔ the directory ids of its log dirs.

The lesson of brokers on Kubernetes: a pod comes back under its old broker id on a volume that is
not its own — a new empty one after a PVC was deleted, or another broker's — and a broker that
takes that for its data rejoins as the old broker, empty (acknowledged records gone where it was
the only in-sync replica) or holding the wrong partitions. So the first start of a broker id
records which log dirs (``directory.id`` in ``meta.properties``, KIP-858) hold its data, under
``claims/brokers/<id>``, and every later start checks it:

- the claimed dirs are all there (more may be: a dir added since joins the claim);
- a claimed dir is missing and the broker's dirs are new: its data is elsewhere or lost, and it
  refuses to start, with a one-line reason;
- a claimed dir is missing and the broker's dirs hold another claim's dir: not its disk, refused;
- started with ``replace``, the operator says the old disks are gone for good: the claim is
  rewritten to these dirs and the broker starts as a new incarnation that replicates its
  partitions again (it is out of every ISR until it has caught up, KIP-380).

The check comes before the broker registers, the write after: a start refused for another reason
(the id is live elsewhere) leaves the claim as it was.

The claim lives in the same store as the cluster id, so a store that is new has no claims and
every broker claims what it has.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from barnabas.coordination import KeyExistsError, Storage, VersionConflictError

from .stored_values import CorruptValueError, StoredDocument

__all__ = ["CLAIMS_PREFIX", "BrokerClaim", "ClaimRefusedError", "PendingClaim", "check_claim", "record_claim"]

log = logging.getLogger(__name__)

CLAIMS_PREFIX = "claims/brokers/"


class ClaimRefusedError(Exception):
    """The log dirs are not the ones this broker id's claim names: starting would lose or mix data."""


@dataclass(frozen=True, slots=True)
class BrokerClaim:
    broker_id: int
    cluster_id: str
    directory_ids: frozenset[str]

    def to_bytes(self) -> bytes:
        document = {
            "broker_id": self.broker_id,
            "cluster_id": self.cluster_id,
            "directories": sorted(self.directory_ids),
        }
        return json.dumps(document).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, what: str = "a broker's claim") -> BrokerClaim:
        """A claim as :meth:`to_bytes` wrote it.

        Raises:
            CorruptValueError: the value is not a claim as barnabas writes it.
        """
        document = StoredDocument(raw, what)
        return cls(document.integer("broker_id"), document.text("cluster_id"), frozenset(document.texts("directories")))


@dataclass(frozen=True, slots=True)
class PendingClaim:
    """The claim a start will write once it is registered (the only live broker with its id)."""

    claim: BrokerClaim
    #: The stored claim's version to replace (0: there is none yet).
    expected_version: int
    #: Claimed directories given up (``replace``), and directories added.
    given_up: frozenset[str]
    added: frozenset[str]


async def check_claim(
    storage: Storage,
    broker_id: int,
    cluster_id: str,
    directory_ids: Mapping[Path, str],
    fresh_dirs: Collection[Path],
    *,
    replace: bool = False,
) -> PendingClaim | None:
    """Check these log dirs against ``broker_id``'s claim: None when it holds as stored, else what to write.

    Nothing is written here: a start that fails later (another live broker has the id) must not
    have moved the claim away from the running broker's dirs.

    Raises:
        ClaimRefusedError: a claimed dir is missing and ``replace`` was not given, or the stored
            claim does not read (taking it as absent would give up the very check it is for).
        CoordinationError: the store cannot be read.
    """
    ours = BrokerClaim(broker_id, cluster_id, frozenset(directory_ids.values()))
    key = f"{CLAIMS_PREFIX}{broker_id}"
    stored = await storage.get(key)
    if stored is None:
        return PendingClaim(ours, 0, frozenset(), ours.directory_ids)
    try:
        claim = BrokerClaim.from_bytes(stored.value, f"broker {broker_id}'s claim {key}")
    except CorruptValueError as exc:
        raise ClaimRefusedError(f"{exc}; repair it, or delete it to let this start claim its log dirs anew") from None
    missing = claim.directory_ids - ours.directory_ids
    if missing and not replace:
        raise ClaimRefusedError(_refusal(claim, missing, directory_ids, fresh_dirs))
    if claim.directory_ids == ours.directory_ids:
        return None
    return PendingClaim(ours, stored.version, frozenset(missing), ours.directory_ids - claim.directory_ids)


async def record_claim(storage: Storage, pending: PendingClaim) -> None:
    """Write a checked claim, once this start is the registered broker of its id.

    Raises:
        ClaimRefusedError: the claim changed since it was checked (another start of this id won).
        CoordinationError: the store cannot be written.
    """
    claim = pending.claim
    key = f"{CLAIMS_PREFIX}{claim.broker_id}"
    try:
        if pending.expected_version == 0:
            await storage.put_if_absent(key, claim.to_bytes())
        else:
            await storage.compare_and_set(key, claim.to_bytes(), pending.expected_version)
    except (KeyExistsError, VersionConflictError):
        raise ClaimRefusedError(
            f"broker {claim.broker_id}'s claim on its log dirs changed while it started: is it starting twice?"
        ) from None
    dirs = ", ".join(sorted(pending.added))
    if pending.given_up:
        gone = ", ".join(sorted(pending.given_up))
        log.warning("broker %d replaces its claim: log dirs %s are gone for good, %s take their place; "
                    "its partitions replicate again", claim.broker_id, gone, dirs)  # fmt: skip
    else:
        log.info("broker %d claims log dirs %s", claim.broker_id, dirs)


def _refusal(
    claim: BrokerClaim, missing: Collection[str], directory_ids: Mapping[Path, str], fresh_dirs: Collection[Path]
) -> str:
    names = ", ".join(sorted(missing))
    if all(log_dir in fresh_dirs for log_dir in directory_ids):
        return (
            f"broker {claim.broker_id}'s log dirs are new, but its data is in directory {names} "
            f"(claimed in cluster {claim.cluster_id}), which none of them is: mount its volume, "
            "or start with --replace if that data is gone for good (its partitions then replicate again)"
        )
    foreign = next(
        (f"{log_dir} (directory {directory_id})" for log_dir, directory_id in directory_ids.items()
         if directory_id not in claim.directory_ids and log_dir not in fresh_dirs),
        "a log dir",
    )  # fmt: skip
    return (
        f"{foreign} is not broker {claim.broker_id}'s: its claim names directory {names}, which is missing; "
        "mount its own volume, or start with --replace to make these dirs its data"
    )
