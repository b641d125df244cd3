"""The proxy's fast Metadata answer is, byte for byte, the rewrite the rewrite table describes."""

from __future__ import annotations

import uuid

import pytest

from barnabas.protocol import decode_response, encode_response
from barnabas.proxy.cluster_view import ClusterView
from barnabas.proxy.metadata_answer import MetadataAnswers, encode_metadata_answer
from barnabas.proxy.nodes import ProxyNodes
from barnabas.proxy.rewrite import rewrite_metadata

from .wire import (
    METADATA,
    TOPICS,
    Topics,
    cluster_view,
    metadata_response,
    payload,
    proxy_nodes,
    response_over_wire,
)


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("me", ["proxy-a", "proxy-b"])
@pytest.mark.parametrize("topic_ids", [True, False], ids=["topic-ids", "zero-ids"])  # zero decodes to None
def test_the_fast_answer_is_the_rewritten_answer_kio_would_encode(version: int, me: str, topic_ids: bool) -> None:
    response = response_over_wire(METADATA, version, metadata_response(version, offline=(103,), topic_ids=topic_ids))
    view, nodes = cluster_view(), proxy_nodes(me)
    expected = encode_response(41, rewrite_metadata(response, version, view, nodes))
    assert encode_metadata_answer(41, response, version, view, nodes) == expected


# -- answers kept ----------------------------------------------------------------------------------


def _broker_payload(version: int, correlation_id: int, topics: Topics = TOPICS) -> bytes:
    """The broker's answer as the proxy reads it off the wire (correlation id first, no size)."""
    return payload(encode_response(correlation_id, metadata_response(version, topics=topics)))


def _joined(answer: bytes | list[bytes | memoryview]) -> bytes:
    return answer if isinstance(answer, bytes) else b"".join(bytes(part) for part in answer)


def _fresh(correlation_id: int, version: int, broker_payload: bytes, view: ClusterView, nodes: ProxyNodes) -> bytes:
    _, response = decode_response(METADATA, version, broker_payload)
    return encode_metadata_answer(correlation_id, response, version, view, nodes)


@pytest.mark.parametrize("version", [1, 9, 12])
def test_a_repeated_broker_answer_gets_the_same_rewritten_answer_under_the_clients_correlation_id(
    version: int,
) -> None:
    view, nodes, answers = cluster_view(), proxy_nodes(), MetadataAnswers()
    first = _joined(answers.answer(5, _broker_payload(version, 900), version, view, nodes))
    again = answers.answer(6, _broker_payload(version, 901), version, view, nodes)
    assert isinstance(again, list), "the second answer was computed again, not kept"
    assert first == _fresh(5, version, _broker_payload(version, 900), view, nodes)
    assert _joined(again) == _fresh(6, version, _broker_payload(version, 901), view, nodes)


def test_a_kept_answer_outlives_a_refresh_that_changed_nothing() -> None:
    view, nodes, answers = cluster_view(), proxy_nodes(), MetadataAnswers()
    broker_payload = _broker_payload(12, 900)
    answers.answer(1, broker_payload, 12, view, nodes)
    view.apply(response_over_wire(METADATA, 12, metadata_response(12)))  # the proxy's own refresh
    assert nodes.set_up({0, 1, 2, 3}) is False
    assert isinstance(answers.answer(2, broker_payload, 12, view, nodes), list)


def test_a_kept_answer_is_dropped_when_the_proxy_nodes_or_the_topic_ids_change() -> None:
    view, nodes, answers = cluster_view(), proxy_nodes(), MetadataAnswers()
    broker_payload = _broker_payload(12, 900)
    answers.answer(1, broker_payload, 12, view, nodes)

    assert nodes.set_up({0, 2})  # proxy-b and proxy-d went down
    after_nodes = answers.answer(2, broker_payload, 12, view, nodes)
    assert isinstance(after_nodes, bytes), "the nodes changed: computed again"
    assert after_nodes == _fresh(2, 12, broker_payload, view, nodes)
    assert {1, 3}.isdisjoint(_named_nodes(after_nodes))

    # The proxy's view learns that orders was deleted and created again (a new id): its partitions
    # hash to other proxy nodes, even in an answer of a version without topic ids.
    recreated = {**TOPICS, "orders": (uuid.UUID(int=42), TOPICS["orders"][1])}
    view.apply(response_over_wire(METADATA, 12, metadata_response(12, topics=recreated)))
    after_ids = answers.answer(3, broker_payload, 12, view, nodes)
    assert isinstance(after_ids, bytes), "the topic ids changed: computed again"
    assert after_ids == _fresh(3, 12, broker_payload, view, nodes)


def _named_nodes(frame: bytes) -> set[int]:
    _, response = decode_response(METADATA, 12, payload(frame))
    return {int(b.node_id) for b in response.brokers}
