"""One client request in, one answer out: route it, relay or split it, rewrite what comes back.

Requests whose answers need nothing rewritten travel as bytes: the client's frame is relayed under
the broker connection's correlation id and the broker's answer goes back under the client's, with
no decoding (Kroxylicious' "decode predicate"; shotover decodes more). Only what must be looked
into is decoded: the group or transactional id of a coordinator's request, the partitions of a
partitioned one that spans several leaders, and the answers that carry node ids (Metadata,
FindCoordinator, DescribeCluster, Produce and Fetch from the versions with KIP-951 fields).
Record sets are never copied: a split Produce's parts carry views of the client's frame, and the
answers to a split Fetch are merged as slices of the brokers' frames unless one names a node.

A broker that cannot be reached, or answers that it no longer leads, makes the proxy read the
cluster's metadata again; the client gets the retriable error Kafka would give
(NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE, a broker's own answer), never a hang. A
Produce part written to a broker whose connection then failed may have been appended: its
partitions answer REQUEST_TIMED_OUT, which clients retry as possibly persisted (what a client
talking to the broker itself makes of the lost connection); NOT_LEADER_OR_FOLLOWER says nothing
was written, and an idempotent producer that times such records out would take them as lost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from barnabas.client import BrokerConnectionError, KafkaClient, RequestFrame
from barnabas.protocol import (
    ErrorCode,
    FetchResponseEntries,
    ProduceRequestData,
    RemoteProtocolError,
    Request,
    decode_request,
    decode_response,
    encode_api_versions_error,
    encode_produce_request_parts,
    encode_request,
    encode_response,
    fetch_response_names_nodes,
    find_fetch_entries,
    make,
    peek_header,
    request_class,
    response_class,
)

from .cluster_view import BrokerAddress, ClusterView, NoBrokerError
from .coordinators import GROUP_KEY, coordinator_key, no_longer_coordinates
from .fetch_merge import merge_fetch_entries
from .keyed import BATCHED, answered_entries, keys_of, merge_keyed, split_keys
from .links import BrokerLinks
from .listings import merge_listings, nothing_listed, own_brokers
from .metadata_answer import MetadataAnswers
from .nodes import ProxyNodes
from .rewrite import (
    rewrite_describe_cluster,
    rewrite_describe_topic_partitions,
    rewrite_fetch,
    rewrite_find_coordinator,
    rewrite_list_partition_reassignments,
    rewrite_produce,
)
from .routes import INTERNAL, ROUTES, UNDERSTOOD, Route, api_name
from .split import PARTITIONED, Partitioned, merge, partition_index, split
from .turns import Turn

__all__ = ["Answer", "CloseConnectionError", "RelayedAnswer", "Router"]

log = logging.getLogger(__name__)

#: A response frame, as one buffer or parts to write in order; None for a request not answered.
Answer = bytes | list[bytes | memoryview] | None


class RelayedAnswer(list[bytes | memoryview]):
    """An answer's parts, some of them views of brokers' answer frames (``frames``), uncopied.

    Whoever writes it hands ``frames`` back to the frame buffer pool once the transport has sent
    them (``FrameReader.recycle``), so the next large answer is read into memory already mapped.
    """

    __slots__ = ("frames",)

    def __init__(self, parts: list[bytes | memoryview], frames: tuple[bytes | memoryview, ...]) -> None:
        super().__init__(parts)
        self.frames = frames


PRODUCE, FETCH, METADATA, OFFSET_FETCH, FIND_COORDINATOR, API_VERSIONS = 0, 1, 3, 9, 10, 18
DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 60, 75
JOIN_GROUP, SYNC_GROUP, LIST_PARTITION_REASSIGNMENTS = 11, 14, 46
#: Fetch requests carry a fetch session (KIP-227) from this version.
FETCH_SESSIONS_FROM = 7
#: The longest a SyncGroup may wait for the group leader's assignment (Kafka's default max.poll.interval.ms).
MAX_REBALANCE_WAIT_S = 300.0
_INT32 = struct.Struct(">i")
NO_THROTTLE = datetime.timedelta(0)
#: Produce and Fetch answers carry node ids to rewrite from these versions (KIP-951, KIP-392).
_REWRITTEN_FROM = {PRODUCE: 10, FETCH: 11}
_STALE = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
}
_NOT_COORDINATOR = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available}


def _keep(frame: bytes | memoryview) -> None:
    """The default for a router without a connection: nothing takes frames back."""


class CloseConnectionError(Exception):
    """The request must not be answered: close the client's connection (the message says why)."""


class UnsentError(BrokerConnectionError):
    """The broker connection failed before the request was written: nothing of it reached the broker."""


class Router:
    def __init__(
        self, view: ClusterView, links: BrokerLinks, nodes: ProxyNodes, rack: str | None, request_timeout_s: float
    ) -> None:
        self.view = view
        self.links = links
        self.nodes = nodes
        self.rack = rack
        self.request_timeout_s = request_timeout_s
        #: api_key -> (min, max) advertised: what the proxy understands and every broker serves.
        self.advertised: dict[int, tuple[int, int]] = {}
        #: Told of a request frame the router is done with and a broker has read whole (it answered it):
        #: the connection's FrameReader takes its buffer back for the next large frame.
        self.done_with_frame: Callable[[bytes | memoryview], None] = _keep
        self.metadata_answers = MetadataAnswers()

    def for_connection(self) -> Router:
        """A router for one client connection: the same view, nodes and versions, its own broker connections."""
        router = Router(self.view, self.links.sibling(), self.nodes, self.rack, self.request_timeout_s)
        router.advertised = self.advertised
        router.metadata_answers = self.metadata_answers  # shared: every client's answers are the same
        return router

    def learn_versions(self, per_broker: Sequence[Mapping[int, tuple[int, int]]]) -> None:
        """Advertise, per API, what the proxy understands and every broker serves."""
        advertised = {}
        for api_key, understood in UNDERSTOOD.items():
            if api_key == API_VERSIONS:
                continue  # answered by the proxy itself
            low, high = understood
            for ranges in per_broker:
                broker_low, broker_high = ranges.get(api_key, (0, -1))
                low, high = max(low, broker_low), min(high, broker_high)
            if low <= high:
                advertised[api_key] = (low, high)
        self.advertised = advertised

    # -- entry point -----------------------------------------------------------------------------

    async def handle(self, frame: bytes | memoryview, turn: Turn) -> Answer:
        """The answer to one request frame (its payload after the size prefix).

        Broker requests are written in ``turn``, after the connection's earlier requests'; the
        caller ends the turn once this returns or raises, whether or not anything was written.

        Raises:
            CloseConnectionError: an internal API, an unknown API or version, bytes that do not
                decode, or no broker to send it to.
        """
        api_key, version, correlation_id = peek_header(frame)
        if api_key in INTERNAL:
            raise CloseConnectionError(f"broker-internal {INTERNAL[api_key]} refused")
        if api_key == API_VERSIONS:
            return self._api_versions(version, correlation_id)
        advertised = self.advertised.get(api_key)
        if advertised is None or not advertised[0] <= version <= advertised[1]:
            raise CloseConnectionError(f"{api_name(api_key)} v{version} is not served")
        route = ROUTES[api_key][1]
        if route is Route.PARTITIONS:
            return await self._partitions(turn, frame, api_key, version, correlation_id)
        if route in (Route.GROUP, Route.TRANSACTION) or (api_key == OFFSET_FETCH and version < 8):
            return await self._coordinated(turn, frame, api_key, version, correlation_id)
        if route in (Route.GROUPS, Route.TRANSACTIONS):
            return await self._batched(turn, frame, api_key, version, correlation_id)
        if route is Route.FIND_COORDINATOR:
            return await self._find_coordinator(turn, frame, version, correlation_id)
        if api_key == LIST_PARTITION_REASSIGNMENTS:
            return await self._rewritten(turn, frame, rewrite_list_partition_reassignments, await self._controller())
        if route is Route.CONTROLLER:
            return await self._relay_to(turn, await self._controller(), frame, correlation_id)
        if route in (Route.FAN_OUT, Route.OWN_BROKERS):
            return await self._fan_out(turn, frame, route)
        if api_key == METADATA:
            await self._refresh()  # a client asking may have found the view stale: so may the proxy's
            payload = await self._relay_or_close(turn, await self._any_broker(), frame)
            return self.metadata_answers.answer(correlation_id, payload, version, self.view, self.nodes)
        if api_key == DESCRIBE_CLUSTER:
            return await self._rewritten(turn, frame, rewrite_describe_cluster)
        if api_key == DESCRIBE_TOPIC_PARTITIONS:
            return await self._rewritten(turn, frame, rewrite_describe_topic_partitions)
        return await self._relay_to(turn, await self._any_broker(), frame, correlation_id)

    def _api_versions(self, version: int, correlation_id: int) -> bytes:
        low, high = UNDERSTOOD[API_VERSIONS]
        if not low <= version <= high:
            return encode_api_versions_error(correlation_id, ErrorCode.unsupported_version, low, high)
        versions = {**self.advertised, API_VERSIONS: (low, high)}
        api_version_cls = response_class(API_VERSIONS, version, "ApiVersion")
        keys = tuple(
            make(api_version_cls, api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(versions.items())
        )
        response = make(
            response_class(API_VERSIONS, version), error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE
        )
        return encode_response(correlation_id, response)

    # -- sending ---------------------------------------------------------------------------------

    async def _relay(
        self,
        turn: Turn,
        broker: BrokerAddress,
        frame: bytes | memoryview,
        *,
        expect: bool = True,
        timeout_s: float | None = None,
    ) -> bytes | memoryview | None:
        """Relay ``frame`` to ``broker`` in ``turn``: its answer, the connection's correlation id first.

        Raises:
            BrokerConnectionError: the broker cannot be reached (the view is refreshed soon).
        """
        try:
            try:
                client = await self.links.get(broker.address)
                await turn.wait()
                pending = client.relay_nowait(frame, expect_response=expect, timeout_s=timeout_s)
            except BrokerConnectionError as exc:
                raise UnsentError(str(exc)) from exc
            turn.end()
            return await pending
        except BrokerConnectionError:
            self._broker_failed(broker)
            raise

    async def _exchange_all(self, turn: Turn, calls: Sequence[tuple[BrokerAddress, int, int, Any]]) -> list[Any]:
        """kio requests to several brokers, all written in ``turn``; each response, or its BrokerConnectionError."""
        return await self._write_all(
            turn,
            [
                (broker, _requester(api_key, version, body, self._timeout_of(api_key, body)))
                for broker, api_key, version, body in calls
            ],
        )

    async def _relay_all(
        self, turn: Turn, calls: Sequence[tuple[BrokerAddress, RequestFrame]], *, expect: bool, timeout_s: float
    ) -> list[Any]:
        """Frames to several brokers, all written in ``turn``: each answer undecoded (None when ``expect`` is
        False), or its BrokerConnectionError."""
        return await self._write_all(turn, [(broker, _relayer(frame, expect, timeout_s)) for broker, frame in calls])

    async def _write_all(
        self, turn: Turn, calls: Sequence[tuple[BrokerAddress, Callable[[KafkaClient], Awaitable[Any]]]]
    ) -> list[Any]:
        """``write(client)`` for each broker's client, all in ``turn``; each result, or its BrokerConnectionError
        (an UnsentError when nothing was written)."""
        clients: list[KafkaClient | UnsentError] = []
        for broker, _ in calls:
            try:
                clients.append(await self.links.get(broker.address))
            except BrokerConnectionError as exc:
                clients.append(UnsentError(str(exc)))
        await turn.wait()
        pending: list[Awaitable[Any]] = []
        for client, (_, write) in zip(clients, calls, strict=True):
            if isinstance(client, UnsentError):
                pending.append(_failed(client))
                continue
            try:
                pending.append(write(client))
            except BrokerConnectionError as exc:  # closed before the write: nothing was sent
                pending.append(_failed(UnsentError(str(exc))))
        turn.end()
        results = list(await asyncio.gather(*pending, return_exceptions=True))
        for (broker, _), result in zip(calls, results, strict=True):
            if isinstance(result, BrokerConnectionError):
                self._broker_failed(broker)
            elif isinstance(result, BaseException):
                raise result
        return results

    async def _ask(self, broker: BrokerAddress, api_key: int, version: int, body: Any) -> Any:
        """The proxy's own request, outside any client's turn, on the proxy's own connections."""
        client = await self.view.links.get(broker.address)
        return await client.request(api_key, version, body)

    def _timeout_of(self, api_key: int, body: Any) -> float:
        """How long a broker may take to answer: ``request.timeout.ms``, plus the wait a request asks for.

        A Fetch may wait ``max_wait``, a JoinGroup its rebalance timeout, a SyncGroup until the
        leader's assignment arrives (bounded by the same); timing out earlier would break the
        broker connection every client's requests share.
        """
        if api_key == FETCH:
            return self.request_timeout_s + _seconds(body.max_wait)
        if api_key == JOIN_GROUP:
            return self.request_timeout_s + _seconds(getattr(body, "rebalance_timeout", body.session_timeout))
        if api_key == SYNC_GROUP:
            return self.request_timeout_s + MAX_REBALANCE_WAIT_S
        return self.request_timeout_s

    def _broker_failed(self, broker: BrokerAddress) -> None:
        self.links.drop(broker.address)
        self._refresh_soon()

    async def _relay_to(
        self, turn: Turn, broker: BrokerAddress | None, frame: bytes | memoryview, correlation_id: int
    ) -> Answer:
        """Relay to ``broker`` (any broker when None) and pass its answer back unchanged."""
        payload = await self._relay_or_close(turn, broker or await self._any_broker(), frame)
        return _client_answer(payload, correlation_id)

    async def _relay_or_close(
        self, turn: Turn, broker: BrokerAddress, frame: bytes | memoryview, timeout_s: float | None = None
    ) -> bytes | memoryview:
        """The broker's answer; a broker that cannot be reached closes the client's connection.

        Kafka's clients take a closed connection as a retriable network error: they refresh their
        metadata (through the proxy, which refreshes its own view) and send again.
        """
        try:
            payload = await self._relay(turn, broker, frame, timeout_s=timeout_s)
        except BrokerConnectionError as exc:
            raise CloseConnectionError(f"broker unreachable: {exc}") from None
        assert payload is not None
        return payload

    # -- the view ----------------------------------------------------------------------------------

    async def _any_broker(self) -> BrokerAddress:
        broker = self.view.any_broker(self.rack)
        if broker is None:
            await self._refresh()
            broker = self.view.any_broker(self.rack)
        if broker is None:
            raise CloseConnectionError("no broker is reachable")
        return broker

    async def _controller(self) -> BrokerAddress | None:
        controller = self.view.brokers.get(self.view.controller_id)
        if controller is None:
            await self._refresh()
            controller = self.view.brokers.get(self.view.controller_id)
        return controller

    async def _refresh(self) -> None:
        try:
            await self.view.refresh()
        except NoBrokerError as exc:
            log.warning("%s", exc)

    def _refresh_soon(self) -> None:
        task = asyncio.get_running_loop().create_task(self._refresh())
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    # -- answers rewritten -----------------------------------------------------------------------

    async def _rewritten(
        self,
        turn: Turn,
        frame: bytes | memoryview,
        rewrite: Callable[[Any, int, ClusterView, ProxyNodes], Any],
        broker: BrokerAddress | None = None,
    ) -> Answer:
        """Relay to ``broker`` (any broker when None) and answer with its response rewritten."""
        api_key, version, correlation_id = peek_header(frame)
        payload = await self._relay_or_close(turn, broker or await self._any_broker(), frame)
        _, response = decode_response(api_key, version, payload)
        return encode_response(correlation_id, rewrite(response, version, self.view, self.nodes))

    async def _find_coordinator(
        self, turn: Turn, frame: bytes | memoryview, version: int, correlation_id: int
    ) -> Answer:
        body = _decode(frame).body
        keys = list(body.coordinator_keys) if version >= 4 else [body.key]
        key_type = int(body.key_type) if version >= 1 else GROUP_KEY
        payload = await self._relay_or_close(turn, await self._any_broker(), frame)
        _, response = decode_response(FIND_COORDINATOR, version, payload)
        rewritten = rewrite_find_coordinator(response, version, self.view, self.nodes, key_type=key_type, keys=keys)
        return encode_response(correlation_id, rewritten)

    # -- coordinators ------------------------------------------------------------------------------

    async def _coordinator(self, key_type: int, key: str) -> BrokerAddress | None:
        """The broker coordinating ``key``: as last answered, else the leader of its partition of
        ``__consumer_offsets`` or ``__transaction_state`` in the view, else asked now (None: not known)."""
        known = self.view.coordinator(key_type, key)
        if known is not None:
            return known
        broker = await self._any_broker()
        body = request_class(FIND_COORDINATOR, 3)(key=key, key_type=key_type)
        try:
            response = await self._ask(broker, FIND_COORDINATOR, 3, body)
        except BrokerConnectionError:
            self.view.links.drop(broker.address)
            self._refresh_soon()
            return None
        if response.error_code != ErrorCode.none:
            return None
        broker_id = int(response.node_id)
        self.view.coordinators[(key_type, key)] = broker_id
        if broker_id not in self.view.brokers:
            await self._refresh()
        return self.view.brokers.get(broker_id)

    async def _coordinated(
        self, turn: Turn, frame: bytes | memoryview, api_key: int, version: int, correlation_id: int
    ) -> Answer:
        """A request of one group or transaction, to its coordinator (else any broker, which answers the
        coordinator error itself); an idempotent producer's InitProducerId to any broker."""
        body = _decode(frame).body
        key = coordinator_key(api_key, body)
        if key is None:
            return await self._relay_to(turn, None, frame, correlation_id)
        key_type, key_id = key
        coordinator = await self._coordinator(key_type, key_id)
        timeout_s = self._timeout_of(api_key, body)
        try:
            payload = await self._relay_or_close(turn, coordinator or await self._any_broker(), frame, timeout_s)
        except CloseConnectionError:
            self.view.forget_coordinator(key_type, key_id)
            raise
        _, response = decode_response(api_key, version, payload)
        if no_longer_coordinates(response):
            self.view.forget_coordinator(key_type, key_id)
        return _client_answer(payload, correlation_id)

    async def _batched(
        self, turn: Turn, frame: bytes | memoryview, api_key: int, version: int, correlation_id: int
    ) -> Answer:
        """DescribeGroups, DeleteGroups, OffsetFetch v8+, DescribeTransactions: each key to its coordinator,
        answers merged."""
        body = _decode(frame).body
        spec = BATCHED[api_key]
        keys = keys_of(spec, body)
        where: dict[str, BrokerAddress] = {}
        for key in dict.fromkeys(keys):
            where[key] = await self._coordinator(spec.key_type, key) or await self._any_broker()
        subs = split_keys(spec, body, where)
        if len(subs) == 1:
            return await self._relay_to(turn, next(iter(subs)), frame, correlation_id)
        calls = [(broker, api_key, version, sub) for broker, sub in subs.items()]
        answers = [r for r in await self._exchange_all(turn, calls) if not isinstance(r, BaseException)]
        for key, entry in answered_entries(spec, answers):
            if getattr(entry, "error_code", ErrorCode.none) in _NOT_COORDINATOR:
                self.view.forget_coordinator(spec.key_type, key)
        return encode_response(correlation_id, merge_keyed(spec, api_key, version, keys, answers))

    # -- fan-out ---------------------------------------------------------------------------------

    async def _fan_out(self, turn: Turn, frame: bytes | memoryview, route: Route) -> Answer:
        """ListGroups, DescribeLogDirs: every broker's answer, merged; ListTransactions: the answers of the
        brokers this node stands for (``listings``)."""
        api_key, version, correlation_id = peek_header(frame)
        body = _decode(frame).body
        if not self.view.brokers:
            await self._refresh()
        if route is Route.OWN_BROKERS:
            brokers = own_brokers(self.view, self.nodes)
            if not brokers:
                return encode_response(correlation_id, nothing_listed(version, body))
        else:
            brokers = list(self.view.brokers.values())
        calls = [(broker, api_key, version, body) for broker in brokers]
        responses = [r for r in await self._exchange_all(turn, calls) if not isinstance(r, BaseException)]
        if not responses:
            raise CloseConnectionError("no broker answered")
        return encode_response(correlation_id, merge_listings(api_key, responses))

    # -- partitions ------------------------------------------------------------------------------

    async def _partitions(
        self, turn: Turn, frame: bytes | memoryview, api_key: int, version: int, correlation_id: int
    ) -> Answer:
        """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords: to each partition's leader."""
        request = _decode(frame)
        body = request.body
        if api_key == FETCH:
            if _replica_id(body) >= 0:
                raise CloseConnectionError("replica fetches are broker-internal")
            if version >= FETCH_SESSIONS_FROM and (body.session_id != 0 or body.session_epoch != -1):
                body, frame = self._sessionless(request, version)
        spec = PARTITIONED[api_key]
        placement = await self._place_all(body, spec)
        leaders = {b.broker_id: b for b in placement.values() if b is not None}
        acks = body.acks if isinstance(body, ProduceRequestData) else None
        timeout_s = self._timeout_of(api_key, body)
        if len(leaders) == 1 and None not in placement.values():
            (broker,) = leaders.values()
            return await self._relay_whole(turn, broker, frame, correlation_id, expect=acks != 0, timeout_s=timeout_s)
        requests, unplaced = split(spec, body, lambda topic, index: _broker_id(placement.get((topic, index))))
        failed = dict.fromkeys(unplaced, ErrorCode.not_leader_or_follower)
        calls = [
            (leaders[broker_id], sub, _sub_frame(api_key, version, request.header.client_id, sub))
            for broker_id, sub in requests.items()
        ]
        results = await self._relay_all(
            turn, [(broker, sub_frame) for broker, _, sub_frame in calls], expect=acks != 0, timeout_s=timeout_s
        )
        if acks == 0:
            return None
        answered = []
        for (broker, sub, _), result in zip(calls, results, strict=True):
            if isinstance(result, BaseException):
                _fail_all(spec, sub, failed, _failure_code(api_key, result))
            else:
                answered.append((broker, sub, result))
        if len(answered) == len(calls):
            self.done_with_frame(frame)  # every broker read its part whole, and nothing below reads the records
        if api_key == FETCH:
            spliced = self._spliced_fetch(version, correlation_id, body, answered, failed)
            if spliced is not None:
                return spliced
        answers = self._decoded(spec, version, answered, failed)
        merged = merge(spec, version, body, answers, failed)
        if api_key == PRODUCE:
            merged = rewrite_produce(merged, version, self.view, self.nodes)
        elif api_key == FETCH:
            merged = rewrite_fetch(merged, version, self.view, self.nodes, lambda topic: topic.topic)
        return encode_response(correlation_id, merged)

    def _spliced_fetch(
        self,
        version: int,
        correlation_id: int,
        body: Any,
        answered: Sequence[tuple[BrokerAddress, Any, bytes | memoryview]],
        failed: Mapping[tuple[Any, int], ErrorCode],
    ) -> RelayedAnswer | None:
        """The brokers' Fetch answers merged as bytes, records uncopied; None when one must be decoded (it
        names a node, carries a tagged field, or does not walk)."""
        found: list[tuple[bytes | memoryview, FetchResponseEntries]] = []
        for _, _, payload in answered:
            entries = find_fetch_entries(payload, version)
            if entries is None:
                return None
            found.append((payload, entries))
        if any(e.error_code in _STALE for _, entries in found for _, topic in entries.topics for e in topic):
            self._refresh_soon()
        merged = merge_fetch_entries(version, correlation_id, body, found, failed)
        return RelayedAnswer(merged, tuple(payload for payload, _ in found))

    def _decoded(
        self,
        spec: Partitioned,
        version: int,
        answered: Sequence[tuple[BrokerAddress, Any, bytes | memoryview]],
        failed: dict[tuple[Any, int], ErrorCode],
    ) -> list[Any]:
        """Each broker's answer decoded; one that does not decode fails its partitions and its connection."""
        answers = []
        for broker, sub, payload in answered:
            try:
                _, response = decode_response(spec.api_key, version, payload)
            except RemoteProtocolError as exc:
                log.warning(
                    "broker %s answered %s that does not decode: %s", broker.address, api_name(spec.api_key), exc
                )
                self._broker_failed(broker)
                _fail_all(spec, sub, failed, _failure_code(spec.api_key, exc))
                continue
            answers.append(response)
            if _has_stale_partition(spec.response_topics, spec.response_partitions, response):
                self._refresh_soon()
        return answers

    @staticmethod
    def _sessionless(request: Request, version: int) -> tuple[Any, bytes]:
        """The Fetch without a fetch session (KIP-227): the proxy keeps none, so neither may a broker.

        A session lives on one broker; a client's partitions on one proxy node span several
        brokers and move between them, so an incremental fetch could not be split. Every fetch is
        a full one (session id 0, epoch -1) and every answer says no session was made.
        """
        body = dataclasses.replace(request.body, session_id=0, session_epoch=-1)
        encoded = encode_request(FETCH, version, request.header.correlation_id, request.header.client_id, body)
        return body, encoded[4:]

    async def _relay_whole(
        self,
        turn: Turn,
        broker: BrokerAddress,
        frame: bytes | memoryview,
        correlation_id: int,
        *,
        expect: bool,
        timeout_s: float,
    ) -> Answer:
        """Every partition has one leader: relay the request as it came, and its answer as it came unless it
        names a node (a KIP-951 new leader, a KIP-392 preferred replica), which is decoded and rewritten."""
        try:
            payload = await self._relay(turn, broker, frame, expect=expect, timeout_s=timeout_s)
        except BrokerConnectionError as exc:
            return self._all_failed(frame, _failure_code(peek_header(frame)[0], exc)) if expect else None
        if payload is None:
            return None
        api_key, version, _ = peek_header(frame)
        self.done_with_frame(frame)  # answered: the broker read all of it, and nothing below reads it
        if api_key == FETCH and version >= _REWRITTEN_FROM[FETCH] and fetch_response_names_nodes(payload, version):
            _, response = decode_response(FETCH, version, payload)
            rewritten = rewrite_fetch(response, version, self.view, self.nodes, lambda topic: topic.topic)
            return encode_response(correlation_id, rewritten)
        if api_key == PRODUCE and version >= _REWRITTEN_FROM[PRODUCE]:
            _, response = decode_response(PRODUCE, version, payload)  # small: no records in it
            if _produce_names_nodes(response):
                return encode_response(correlation_id, rewrite_produce(response, version, self.view, self.nodes))
        return _client_answer(payload, correlation_id)

    def _all_failed(self, frame: bytes | memoryview, code: ErrorCode) -> bytes:
        """Every partition of the request answered ``code``: its leader's connection failed."""
        api_key, version, correlation_id = peek_header(frame)
        body = _decode(frame).body
        spec = PARTITIONED[api_key]
        failed: dict[tuple[Any, int], ErrorCode] = {}
        _fail_all(spec, body, failed, code)
        return encode_response(correlation_id, merge(spec, version, body, [], failed))

    async def _place_all(self, body: Any, spec: Partitioned) -> dict[tuple[Any, int], BrokerAddress | None]:
        """Each (topic, partition) of the request and its leader (None: not known even after a refresh)."""

        def place() -> dict[tuple[Any, int], BrokerAddress | None]:
            placement: dict[tuple[Any, int], BrokerAddress | None] = {}
            for topic in getattr(body, spec.topics):
                name = getattr(topic, spec.topic)
                for partition in getattr(topic, spec.partitions):
                    index = partition_index(spec, partition)
                    placement[(name, index)] = self.view.leader(name, index)
            return placement

        placement = place()
        if None in placement.values():
            await self._refresh()
            placement = place()
        return placement


_BACKGROUND: set[asyncio.Task[None]] = set()


def _produce_names_nodes(response: Any) -> bool:
    """Whether a Produce answer names a node: a new leader of a partition (KIP-951), node endpoints."""
    if getattr(response, "node_endpoints", ()):
        return True
    for topic in response.responses:
        for partition in topic.partition_responses:
            leader = getattr(partition, "current_leader", None)
            if leader is not None and int(leader.leader_id) >= 0:
                return True
    return False


def _seconds(duration: Any) -> float:
    """A kio duration (a timedelta; plain milliseconds in the oldest schemas) in seconds."""
    if isinstance(duration, datetime.timedelta):
        return duration.total_seconds()
    return int(duration) / 1000


def _broker_id(broker: BrokerAddress | None) -> int | None:
    return None if broker is None else broker.broker_id


def _client_answer(payload: bytes | memoryview, correlation_id: int) -> RelayedAnswer:
    """A broker's answer under the client's correlation id (the payload itself is not copied)."""
    return RelayedAnswer([_INT32.pack(len(payload)), _INT32.pack(correlation_id), memoryview(payload)[4:]], (payload,))


async def _failed(exc: BaseException) -> Any:
    raise exc


def _decode(frame: bytes | memoryview) -> Request:
    try:
        return decode_request(frame)
    except Exception as exc:
        raise CloseConnectionError(f"request does not decode: {exc}") from None


def _replica_id(fetch: Any) -> int:
    state = getattr(fetch, "replica_state", None)
    if state is not None and int(state.replica_id) >= 0:
        return int(state.replica_id)
    return int(getattr(fetch, "replica_id", -1))


def _has_stale_partition(topics_field: str, partitions_field: str, response: Any) -> bool:
    return any(p.error_code in _STALE for t in getattr(response, topics_field) for p in getattr(t, partitions_field))


def _sub_frame(api_key: int, version: int, client_id: str | None, sub: Any) -> RequestFrame:
    """A broker's part of a split request, under the client's client id (correlation id 0: the relay sets it).

    A Produce's part is written around the client's record sets (views of its frame, uncopied).
    """
    if isinstance(sub, ProduceRequestData):
        return encode_produce_request_parts(version, 0, client_id, sub)
    return memoryview(encode_request(api_key, version, 0, client_id, sub))[4:]


def _fail_all(spec: Partitioned, sub: Any, failed: dict[tuple[Any, int], ErrorCode], code: ErrorCode) -> None:
    """Every partition of ``sub`` answered ``code``: its broker failed."""
    for topic in getattr(sub, spec.topics):
        for partition in getattr(topic, spec.partitions):
            failed[(getattr(topic, spec.topic), partition_index(spec, partition))] = code


def _failure_code(api_key: int, exc: BaseException) -> ErrorCode:
    """What a partition whose broker connection failed answers: REQUEST_TIMED_OUT for a Produce that was
    written (it may have been appended), NOT_LEADER_OR_FOLLOWER otherwise (refresh and send again)."""
    if api_key == PRODUCE and not isinstance(exc, UnsentError):
        return ErrorCode.request_timed_out
    return ErrorCode.not_leader_or_follower


def _requester(api_key: int, version: int, body: Any, timeout_s: float) -> Callable[[KafkaClient], Awaitable[Any]]:
    return lambda client: client.request_nowait(api_key, version, body, timeout_s=timeout_s)


def _relayer(frame: RequestFrame, expect: bool, timeout_s: float) -> Callable[[KafkaClient], Awaitable[Any]]:
    return lambda client: client.relay_nowait(frame, expect_response=expect, timeout_s=timeout_s)
