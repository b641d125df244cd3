"""The decoders of the values barnabas keeps in coordination storage, one JSON document each.

Input: one byte picks the decoder, the rest is the stored value: a topic (``topics/<name>``), a
partition state (``partitions/<topic>/<p>``), a live broker (the ``brokers`` group's member data)
or a broker's claim on its log dirs. A value these decoders accept must encode and decode back to
the same value, since brokers rewrite what they read (compare-and-set on the partition key).

None of them documents its errors, and their callers let whatever they raise propagate. What they
raise on a malformed value today is accepted here: ValueError (JSON syntax, bytes that are not
UTF-8, a bad UUID, ``int()`` of a bad string or of NaN), KeyError (a missing field), TypeError and
AttributeError (a field of the wrong JSON type), OverflowError (``int()`` of Infinity, which
Python's JSON reader accepts) and RecursionError (arrays nested a few thousand deep). Anything else
is a finding; so is a value that does not survive its round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barnabas.cluster.brokers import BrokerInfo
from barnabas.cluster.claims import BrokerClaim
from barnabas.cluster.model import PartitionState, Topic
from tests.fuzz.harness import Target, attempt

#: What the decoders raise on malformed values (none documents its errors; see the module docstring).
MALFORMED = (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError)


def _topic(data: bytes) -> tuple[Any, Callable[[Any], bytes], Callable[[bytes], Any]]:
    return Topic.from_json("orders", data), Topic.to_json, lambda raw: Topic.from_json("orders", raw)


def _partition(data: bytes) -> tuple[Any, Callable[[Any], bytes], Callable[[bytes], Any]]:
    return PartitionState.from_json(data), PartitionState.to_json, PartitionState.from_json


def _broker(data: bytes) -> tuple[Any, Callable[[Any], bytes], Callable[[bytes], Any]]:
    return BrokerInfo.from_json(7, data), BrokerInfo.to_json, lambda raw: BrokerInfo.from_json(7, raw)


def _claim(data: bytes) -> tuple[Any, Callable[[Any], bytes], Callable[[bytes], Any]]:
    return BrokerClaim.from_bytes(data), BrokerClaim.to_bytes, BrokerClaim.from_bytes


DECODERS = (_topic, _partition, _broker, _claim)


def run(data: bytes) -> None:
    if not data:
        return
    decoded = attempt(lambda: DECODERS[data[0] % len(DECODERS)](data[1:]), *MALFORMED)
    if decoded is None:
        return
    value, encode, decode = decoded
    assert decode(encode(value)) == value, "a stored value does not survive its round trip"


TARGET = Target("coordination", run, __doc__ or "", max_len=4096)
