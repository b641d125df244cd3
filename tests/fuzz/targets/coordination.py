"""The decoders of the values barnabas keeps in coordination storage, one JSON document each.

Input: one byte picks the decoder, the rest is the stored value: a topic (``topics/<name>``), a
partition state (``partitions/<topic>/<p>``), a live broker (the ``brokers`` group's member data),
a broker's claim on its log dirs, or a user's SCRAM credential (``credentials/scram/...``).

Documented: CorruptValueError, and nothing else (``barnabas.cluster.stored_values``). A value a
decoder accepts must be of the shape barnabas writes, field by field (``"isr": "12"`` read as the
brokers "1" and "2" is a finding, as is ``true`` read as a broker id), and must encode and decode
back to the same value, since brokers rewrite what they read (compare-and-set on the partition key).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from barnabas.cluster.brokers import BrokerInfo
from barnabas.cluster.claims import BrokerClaim
from barnabas.cluster.credentials import _from_json as credential_from_json
from barnabas.cluster.credentials import _to_json as credential_to_json
from barnabas.cluster.model import PartitionState, Topic
from barnabas.cluster.stored_values import CorruptValueError
from barnabas.security.scram import ScramCredential
from tests.fuzz.harness import Target, attempt

_Decoded = tuple[Any, Callable[[Any], bytes], Callable[[bytes], Any], Callable[[Any], bool]]


def _ints(values: Iterable[object]) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _strs(values: Iterable[object]) -> bool:
    return all(isinstance(v, str) for v in values)


def _topic_shaped(topic: Topic) -> bool:
    return (
        isinstance(topic.topic_id, uuid.UUID)
        and isinstance(topic.internal, bool)
        and _ints(topic.assignment)
        and all(isinstance(r, tuple) and _ints(r) for r in topic.assignment.values())
        and _strs(topic.config)
        and _strs(topic.config.values())
        and _ints(topic.reassigning)
        and all(_ints((*r.adding, *r.removing)) for r in topic.reassigning.values())
    )


def _state_shaped(state: PartitionState) -> bool:
    return (
        _ints((state.leader, state.leader_epoch, state.controller_epoch, *state.isr))
        and isinstance(state.isr, tuple)
        and _ints((*state.broker_epochs, *state.broker_epochs.values()))
        and (state.topic_id is None or isinstance(state.topic_id, uuid.UUID))
    )


def _broker_shaped(info: BrokerInfo) -> bool:
    endpoints = info.endpoints
    return (
        _strs((info.host, *(e.listener for e in endpoints), *(e.host for e in endpoints)))
        and _strs(e.security_protocol for e in endpoints)
        and _ints((info.port, info.epoch, *(e.port for e in endpoints)))
        and (info.rack is None or isinstance(info.rack, str))
        and isinstance(info.clean, bool)
    )


def _claim_shaped(claim: BrokerClaim) -> bool:
    return _ints((claim.broker_id,)) and isinstance(claim.cluster_id, str) and _strs(claim.directory_ids)


def _credential_shaped(credential: ScramCredential) -> bool:
    keys = (credential.salt, credential.stored_key, credential.server_key)
    return all(isinstance(k, bytes) for k in keys) and _ints((credential.iterations,))


def _topic(data: bytes) -> _Decoded:
    def decode(raw: bytes) -> Topic:
        return Topic.from_json("orders", raw)

    return decode(data), Topic.to_json, decode, _topic_shaped


def _partition(data: bytes) -> _Decoded:
    return PartitionState.from_json(data), PartitionState.to_json, PartitionState.from_json, _state_shaped


def _broker(data: bytes) -> _Decoded:
    def decode(raw: bytes) -> BrokerInfo:
        return BrokerInfo.from_json(7, raw)

    return decode(data), BrokerInfo.to_json, decode, _broker_shaped


def _claim(data: bytes) -> _Decoded:
    return BrokerClaim.from_bytes(data), BrokerClaim.to_bytes, BrokerClaim.from_bytes, _claim_shaped


def _credential(data: bytes) -> _Decoded:
    def decode(raw: bytes) -> ScramCredential:
        return credential_from_json(raw, "credentials/scram/SCRAM-SHA-256/alice")

    return decode(data), credential_to_json, decode, _credential_shaped


DECODERS = (_topic, _partition, _broker, _claim, _credential)


def run(data: bytes) -> None:
    if not data:
        return
    decoded = attempt(lambda: DECODERS[data[0] % len(DECODERS)](data[1:]), CorruptValueError)
    if decoded is None:
        return
    value, encode, decode, shaped = decoded
    assert shaped(value), f"a stored value was read as another shape: {value!r}"
    assert decode(encode(value)) == value, "a stored value does not survive its round trip"


TARGET = Target("coordination", run, __doc__ or "", max_len=4096)
