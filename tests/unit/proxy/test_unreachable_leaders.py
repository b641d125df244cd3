"""A Produce whose leaders cannot be reached at all is answered NOT_LEADER_OR_FOLLOWER.

Nothing was written to any broker, so nothing can have been appended: the client may refresh its
metadata and send again as if the records never left (a Produce written to a broker whose
connection failed afterwards is the other case, answered REQUEST_TIMED_OUT: see the proxy's
integration tests). The brokers here are real loopback ports nothing listens on: every
connection is refused, as a dead broker's are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime

from barnabas.broker.handlers import build_registry
from barnabas.protocol import ErrorCode, build_record_batch, decode_response, encode_request, request_class
from barnabas.proxy.router import Router
from barnabas.proxy.turns import TurnChain
from barnabas.testing.process import free_ports

from .wire import CLIENT_ID, cluster_view, payload, proxy_nodes

PRODUCE, VERSION = 0, 9
SERVED = {key: (low, high) for key, low, high in build_registry().versions()}


def unreachable_router() -> Router:
    """A router whose every broker (and bootstrap address) is a loopback port that refuses connections."""
    (refused,) = free_ports(1)
    view = cluster_view()
    view.brokers = {
        broker_id: dataclasses.replace(broker, host="127.0.0.1", port=refused)
        for broker_id, broker in view.brokers.items()
    }
    view.bootstrap = (("127.0.0.1", refused),)
    router = Router(view, view.links.sibling(), proxy_nodes(), None, 1.0)
    router.learn_versions([SERVED])
    return router


def produce_frame(partitions: list[int]) -> bytes:
    topic_cls = request_class(PRODUCE, VERSION, "TopicProduceData")
    partition_cls = request_class(PRODUCE, VERSION, "PartitionProduceData")
    batch = build_record_batch([(None, b"value")], base_timestamp_ms=1_700_000_000_000)
    body = request_class(PRODUCE, VERSION)(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=(
            topic_cls(name="orders", partition_data=tuple(partition_cls(index=p, records=batch) for p in partitions)),
        ),
    )
    return payload(encode_request(PRODUCE, VERSION, 7, CLIENT_ID, body))


def answer_codes(router: Router, frame: bytes) -> dict[int, ErrorCode]:
    async def ask() -> bytes:
        answer = await router.handle(frame, TurnChain().next())
        assert answer is not None
        return b"".join(bytes(part) for part in answer)[4:] if isinstance(answer, list) else answer[4:]

    _, response = decode_response(PRODUCE, VERSION, asyncio.run(ask()))
    (topic,) = response.responses
    return {int(p.index): ErrorCode(p.error_code) for p in topic.partition_responses}


def test_a_produce_to_one_unreachable_leader_is_answered_not_leader_or_follower() -> None:
    codes = answer_codes(unreachable_router(), produce_frame([0]))  # orders-0: broker 101 alone
    assert codes == {0: ErrorCode.not_leader_or_follower}


def test_a_produce_split_over_unreachable_leaders_is_answered_not_leader_or_follower() -> None:
    codes = answer_codes(unreachable_router(), produce_frame([0, 1, 2]))  # brokers 101, 102, 103
    assert codes == dict.fromkeys([0, 1, 2], ErrorCode.not_leader_or_follower)
