"""The proxy's fast Metadata answer is, byte for byte, the rewrite the rewrite table describes."""

from __future__ import annotations

import pytest

from barnabas.protocol import encode_response
from barnabas.proxy.metadata_answer import encode_metadata_answer
from barnabas.proxy.rewrite import rewrite_metadata

from .wire import METADATA, cluster_view, metadata_response, proxy_nodes, response_over_wire


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("me", ["proxy-a", "proxy-b"])
@pytest.mark.parametrize("topic_ids", [True, False], ids=["topic-ids", "zero-ids"])  # zero decodes to None
def test_the_fast_answer_is_the_rewritten_answer_kio_would_encode(version: int, me: str, topic_ids: bool) -> None:
    response = response_over_wire(METADATA, version, metadata_response(version, offline=(103,), topic_ids=topic_ids))
    view, nodes = cluster_view(), proxy_nodes(me)
    expected = encode_response(41, rewrite_metadata(response, version, view, nodes))
    assert encode_metadata_answer(41, response, version, view, nodes) == expected
