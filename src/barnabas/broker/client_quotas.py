"""Client quotas as Kafka enforces them: which quota applies to a request, its rate, and the throttle time.

Rules this module keeps (Kafka's ClientQuotaManager, ClientRequestQuotaManager,
ControllerMutationQuotaManager and KafkaApis):

- A quota applies per user (the connection's principal name, ``ANONYMOUS`` without one) and client
  id, the most specific configured entity winning, in Kafka's order: (user, client-id),
  (user, default client-id), user, (default user, client-id), (default user, default client-id),
  default user, client-id, default client-id. Each quota key is looked up on its own: an entity
  without ``consumer_byte_rate`` does not hide another's.
- Every client matched by the same entity shares one rate (Kafka's metric tags): a user quota is one
  rate over all the user's client ids, a client-id quota one over all users of that id.
- Produce counts the request's bytes when it arrives; Fetch counts its answer's bytes once built
  (follower fetches are exempt); every request but SASL ones counts the time its handler ran on
  the event loop, as a percentage of one thread (Kafka counts request handler thread time).
- The throttle time is the largest of the violated quotas' (``quota_rate.Rate``), the request-time
  one at most one window long. It is written into the answer's ``throttle_time_ms`` and the
  connection reads no further request for that long (Kafka's channel muting, KIP-219); the answer
  itself is sent at once, data included.
- ``controller_mutation_rate`` (KIP-599) is a token bucket per shared rate, over its own windows
  (``controller.quota.window.*``). The admin handlers count partitions created, deleted or added
  through ``mutation_quota(strict_since)``, which gives them the running request's quota (a context
  variable is set while its handler runs): from ``strict_since`` on, a topic that comes while the
  bucket is in debt is refused (ThrottlingQuotaExceededError) and nothing of it is counted; older
  versions are permissive, taking everything and throttling once in debt. The answer's throttle
  time is the larger of this quota's and the request-time one's.
- Nothing is measured while no quota is configured, so an unquota'd broker pays nothing; a client
  without a controller mutation quota gets ``UNBOUNDED``, which counts nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator, Sized
from contextvars import ContextVar
from dataclasses import dataclass, field
from time import monotonic, perf_counter
from typing import Any

from barnabas.cluster.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaStore,
    QuotaEntity,
)
from barnabas.protocol import Request, with_throttle_time

from .quota_rate import Rate, TokenBucket

__all__ = [
    "UNBOUNDED",
    "ClientQuotas",
    "MutationQuota",
    "RequestMeter",
    "ThrottlingQuotaExceededError",
    "mutation_quota",
]

PRODUCE_KEY, FETCH_KEY = 0, 1
#: SaslHandshake and SaslAuthenticate: authentication is never throttled (Kafka handles it before KafkaApis).
EXEMPT_KEYS = frozenset({17, 36})
#: Sensors unused this long are dropped (Kafka's InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_MS = 3_600_000
_LOOKUP_CACHE_MAX = 10_000

#: (quota key, user tag, client-id tag): one shared rate, as Kafka's metric tags name one sensor.
SensorKey = tuple[str, str, str]


class ThrottlingQuotaExceededError(Exception):
    """A strict controller mutation quota refused a topic: its client is in debt (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__("The throttling quota has been exceeded.")  # Errors.THROTTLING_QUOTA_EXCEEDED's message
        #: How long until the client's bucket is out of debt.
        self.throttle_ms = throttle_ms


class MutationQuota:
    """One request's hold on its client's controller mutation quota; this base is unbounded and counts nothing."""

    strict = False
    bounded = False

    def record(self, partitions: float) -> None:
        """Count ``partitions`` mutations (created, deleted or added).

        Raises:
            ThrottlingQuotaExceededError: a strict quota whose bucket is already in debt; nothing is counted.
        """

    def throttle_ms(self) -> int:
        """The throttle time the request's answer carries: 0 when it was not held back."""
        return 0


#: The quota of a request no controller mutation quota applies to (Kafka's UnboundedControllerMutationQuota).
UNBOUNDED = MutationQuota()


class _BucketQuota(MutationQuota):
    """A bounded quota over a shared bucket (Kafka's Strict- and PermissiveControllerMutationQuota)."""

    bounded = True

    def __init__(self, quotas: ClientQuotas, bucket: TokenBucket, rate: float, sensor: SensorKey, strict: bool) -> None:
        self.strict = strict
        self.sensor = sensor
        self._quotas, self._bucket, self._rate = quotas, bucket, rate
        self._burst = quotas.controller_samples * quotas.controller_window_s * rate
        self._throttle_ms = 0
        self._throttled_at_ms = 0

    def record(self, partitions: float) -> None:
        now_ms = self._quotas.clock_ms()
        if self.strict:
            if (credits := self._bucket.credits(self._rate, self._burst, now_ms)) < 0:
                self._held_back(credits, now_ms)
                raise ThrottlingQuotaExceededError(self._throttle_ms)
            self._bucket.record(partitions, self._rate, self._burst, now_ms)
            return
        self._bucket.record(partitions, self._rate, self._burst, now_ms)
        if (credits := self._bucket.credits(self._rate, self._burst, now_ms)) < 0:
            self._held_back(credits, now_ms)

    def throttle_ms(self) -> int:
        # What is left of the last throttle time: the answer may go out a while after it was decided.
        return max(0, self._throttle_ms - (self._quotas.clock_ms() - self._throttled_at_ms))

    def _held_back(self, credits: float, now_ms: int) -> None:
        self._throttle_ms = TokenBucket.throttle_ms(credits, self._rate)
        self._throttled_at_ms = now_ms


#: The request whose handler is running, so the admin handlers reach its mutation quota.
_RUNNING: ContextVar[RequestMeter | None] = ContextVar("barnabas_running_request", default=None)


def mutation_quota(strict_since: int) -> MutationQuota:
    """The running request's controller mutation quota: strict from version ``strict_since`` on.

    Kafka's ControllerMutationQuotaManager.newQuotaFor; ``UNBOUNDED`` when no quota applies or no
    request is being metered (no quota is configured at all). One request gets one quota, however
    often it asks.
    """
    meter = _RUNNING.get()
    return UNBOUNDED if meter is None else meter.mutation_quota(strict_since)


def _precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, str, str]]:
    """The entities that may give a (user, client-id) its quota, most specific first, with their sensor tags."""
    both: list[tuple[QuotaEntity, str, str]] = [
        (((CLIENT_ID, client_id), (USER, user)), user, client_id),
        (((CLIENT_ID, None), (USER, user)), user, client_id),
        (((USER, user),), user, ""),
        (((CLIENT_ID, client_id), (USER, None)), user, client_id),
        (((CLIENT_ID, None), (USER, None)), user, client_id),
        (((USER, None),), user, ""),
    ]
    return [*both, (((CLIENT_ID, client_id),), "", client_id), (((CLIENT_ID, None),), "", client_id)]


@dataclass
class ClientQuotas:
    """Every client's rates against the configured quotas, and what throttling cost whom."""

    store: ClientQuotaStore
    samples: int = 11
    window_s: int = 1
    #: The controller mutation quota's windows: its burst is samples x window x rate.
    controller_samples: int = 11
    controller_window_s: int = 1
    clock_ms: Callable[[], int] = lambda: int(monotonic() * 1000)
    _sensors: dict[SensorKey, Rate] = field(default_factory=dict)
    _buckets: dict[SensorKey, TokenBucket] = field(default_factory=dict)
    _lookups: dict[tuple[str, str, str], tuple[float, SensorKey] | None] = field(default_factory=dict)
    _generation: int = -1
    _keys_in_use: frozenset[str] = frozenset()
    _last_purge_ms: int = 0
    #: sensor -> (throttled answers, throttle time in ms), for the metrics.
    throttled: dict[SensorKey, tuple[int, int]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Whether any quota is configured (else nothing is measured)."""
        self._sync()
        return bool(self._keys_in_use)

    def meter(self, user: str, request: Request) -> RequestMeter | None:
        """What to measure of ``request`` from ``user``; None when no quota can apply to it."""
        api_key = request.header.api_key
        if api_key in EXEMPT_KEYS or (api_key == FETCH_KEY and getattr(request.body, "replica_id", -1) >= 0):
            return None
        return RequestMeter(self, user, request.header.client_id or "", api_key, request.header.api_version)

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, SensorKey] | None:
        """The bound on ``key`` for this client and the rate it shares, or None without one."""
        self._sync()
        if key not in self._keys_in_use:
            return None
        lookup = (key, user, client_id)
        if lookup in self._lookups:
            return self._lookups[lookup]
        found = None
        for entity, user_tag, client_tag in _precedence(user, client_id):
            bound = self.store.get(entity, key)
            if bound is not None:
                found = (bound, (key, user_tag, client_tag))
                break
        if len(self._lookups) >= _LOOKUP_CACHE_MAX:
            self._lookups.clear()
        self._lookups[lookup] = found
        return found

    def record(self, key: str, user: str, client_id: str, value: float) -> int:
        """Add ``value`` to this client's rate for ``key``; the throttle time in ms (0 within the quota)."""
        quota = self.quota(key, user, client_id)
        if quota is None:
            return 0
        bound, sensor_key = quota
        now_ms = self.clock_ms()
        rate = self._sensors.get(sensor_key)
        if rate is None:
            self._purge(now_ms)
            rate = self._sensors[sensor_key] = Rate(self.samples, self.window_s * 1000)
        rate.record(value, now_ms)
        throttle_ms = rate.throttle_ms(bound, now_ms)
        if key == REQUEST_PERCENTAGE:
            throttle_ms = min(throttle_ms, self.window_s * 1000)
        self.count_throttle(sensor_key, throttle_ms)
        return throttle_ms

    def mutation_quota(self, user: str, client_id: str, strict: bool) -> MutationQuota:
        """This client's controller mutation quota for one request, strict or permissive; or ``UNBOUNDED``."""
        quota = self.quota(CONTROLLER_MUTATION_RATE, user, client_id)
        if quota is None:
            return UNBOUNDED
        rate, sensor_key = quota
        bucket = self._buckets.get(sensor_key)
        if bucket is None:
            self._purge(self.clock_ms())
            bucket = self._buckets[sensor_key] = TokenBucket()
        return _BucketQuota(self, bucket, rate, sensor_key, strict)

    def count_throttle(self, sensor_key: SensorKey, throttle_ms: int) -> None:
        """Note an answer throttled ``throttle_ms`` for this sensor's quota (nothing when 0), for the metrics."""
        if throttle_ms > 0:
            count, total = self.throttled.get(sensor_key, (0, 0))
            self.throttled[sensor_key] = (count + 1, total + throttle_ms)

    def rates(self) -> dict[SensorKey, float]:
        """Each live sensor's rate now (bytes per second, or percent), for the metrics."""
        now_ms = self.clock_ms()
        return {key: rate.measure(now_ms) for key, rate in self._sensors.items()}

    def _sync(self) -> None:
        """Drop cached lookups when the configured quotas changed."""
        if self._generation != self.store.generation:
            self._generation = self.store.generation
            self._lookups.clear()
            self._keys_in_use = frozenset(key for quotas in self.store.entries().values() for key in quotas)

    def _purge(self, now_ms: int) -> None:
        if now_ms - self._last_purge_ms < 60_000:
            return
        self._last_purge_ms = now_ms
        for key in [k for k, rate in self._sensors.items() if now_ms - rate.last_record_ms > INACTIVE_SENSOR_MS]:
            del self._sensors[key]
            self.throttled.pop(key, None)
        for key in [k for k, bucket in self._buckets.items() if now_ms - bucket.last_update_ms > INACTIVE_SENSOR_MS]:
            del self._buckets[key]
            self.throttled.pop(key, None)


@dataclass
class RequestMeter:
    """One request's share of its client's quotas: its bytes in, its handler's time, its answer's bytes."""

    quotas: ClientQuotas
    user: str
    client_id: str
    api_key: int
    api_version: int
    #: Seconds the handler ran on the event loop so far.
    busy_s: float = 0.0
    #: The throttle time decided when the request arrived (Produce's bytes).
    throttle_ms: int = 0
    #: The controller mutation quota, once the handler asked for it.
    mutation: MutationQuota | None = None

    def arrived(self, frame_size: int) -> None:
        """The request's frame came in (Produce counts its bytes now, as Kafka does before appending)."""
        if self.api_key == PRODUCE_KEY:
            self.throttle_ms = self.quotas.record(PRODUCER_BYTE_RATE, self.user, self.client_id, frame_size)

    def mutation_quota(self, strict_since: int) -> MutationQuota:
        """The request's controller mutation quota, strict from ``strict_since`` (asked once, then kept)."""
        if self.mutation is None:
            strict = self.api_version >= strict_since
            self.mutation = self.quotas.mutation_quota(self.user, self.client_id, strict)
        return self.mutation

    def run(self, handler: Callable[[], Any], throttle: Callable[[int], None]) -> Any:
        """Run the handler, timing it; its answer (or an awaitable of it) carries the throttle time."""
        started = perf_counter()
        running = _RUNNING.set(self)
        try:
            result = handler()
        finally:
            _RUNNING.reset(running)
        self.busy_s += perf_counter() - started
        if inspect.isawaitable(result):
            return self._finish_later(result, throttle)
        return self._finish(result, throttle)

    async def _finish_later(self, result: Awaitable[Any], throttle: Callable[[int], None]) -> Any:
        return self._finish(await _Timed(result, self), throttle)

    def _finish(self, response: Any, throttle: Callable[[int], None]) -> Any:
        quotas, user, client_id = self.quotas, self.user, self.client_id
        throttle_ms = max(self.throttle_ms, quotas.record(REQUEST_PERCENTAGE, user, client_id, self.busy_s * 100))
        if self.api_key == FETCH_KEY and isinstance(response, list):
            size = sum(len(chunk) for chunk in response if isinstance(chunk, Sized))
            throttle_ms = max(throttle_ms, quotas.record(CONSUMER_BYTE_RATE, user, client_id, size))
        if isinstance(self.mutation, _BucketQuota):  # KafkaApis.sendResponseMaybeThrottleWithControllerQuota
            mutation_ms = self.mutation.throttle_ms()
            quotas.count_throttle(self.mutation.sensor, mutation_ms)
            throttle_ms = max(throttle_ms, mutation_ms)
        if throttle_ms <= 0:
            return response
        throttle(throttle_ms)
        if isinstance(response, bytes):
            return with_throttle_time(self.api_key, self.api_version, response, throttle_ms)
        if isinstance(response, list):
            return with_throttle_time(self.api_key, self.api_version, response, throttle_ms)
        return response


class _Timed:
    """Await ``inner``, adding the time each of its steps runs to ``meter.busy_s`` (not the time it waits).

    Each step runs with ``meter`` as the running request, so ``mutation_quota`` finds it.
    """

    __slots__ = ("_inner", "_meter")

    def __init__(self, inner: Awaitable[Any], meter: RequestMeter) -> None:
        self._inner = inner
        self._meter = meter

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._inner.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = perf_counter()
            running = _RUNNING.set(self._meter)
            try:
                yielded = steps.throw(thrown) if thrown is not None else steps.send(sent)
            except StopIteration as stop:
                self._meter.busy_s += perf_counter() - started
                return stop.value
            finally:
                _RUNNING.reset(running)
            self._meter.busy_s += perf_counter() - started
            sent, thrown = None, None
            try:
                sent = yield yielded
            except BaseException as exc:
                thrown = exc
