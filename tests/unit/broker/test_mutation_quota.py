"""The controller mutation quota's decisions (KIP-599): Kafka's TokenBucket and Strict/Permissive quotas.

The numbers are those of Kafka's own tests (StrictControllerMutationQuotaTest,
PermissiveControllerMutationQuotaTest, ControllerMutationQuotaManagerTest), on a clock the test moves.
"""

from __future__ import annotations

import asyncio

import pytest

from barnabas.broker.client_quotas import (
    UNBOUNDED,
    ClientQuotas,
    MutationQuota,
    RequestMeter,
    ThrottlingQuotaExceededError,
    mutation_quota,
)
from barnabas.broker.quota_rate import TokenBucket
from barnabas.cluster.client_quotas import CLIENT_ID, QuotaEntity
from barnabas.protocol import NO_THROTTLE, decode_response, encode_response, make, response_types

KEY = "controller_mutation_rate"


class _Store:
    """The quota store's read side, filled directly."""

    def __init__(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        self._quotas = quotas
        self.generation = 1

    def entries(self) -> dict[QuotaEntity, dict[str, float]]:
        return self._quotas

    def get(self, entity: QuotaEntity, key: str) -> float | None:
        return self._quotas.get(entity, {}).get(key)


class _Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def _quotas(rate: float, clock: _Clock, samples: int = 10) -> ClientQuotas:
    """A rate of ``rate`` mutations per second for client id "app", over ``samples`` windows of 1 s."""
    store = _Store({((CLIENT_ID, "app"),): {KEY: rate}})
    return ClientQuotas(store, controller_samples=samples, controller_window_s=1, clock_ms=clock)  # type: ignore[arg-type]


def test_a_bucket_starts_full_refills_at_the_rate_and_never_past_the_burst() -> None:
    bucket = TokenBucket()
    assert bucket.credits(10, 100, now_ms=5_000) == 100
    bucket.record(130, 10, 100, now_ms=5_000)
    assert bucket.credits(10, 100, now_ms=5_000) == -30
    assert bucket.credits(10, 100, now_ms=6_500) == -15  # 1.5 s at 10 per second
    assert bucket.credits(10, 100, now_ms=60_000) == 100


def test_the_throttle_time_is_the_debts_refill_time_rounded_half_up() -> None:
    # ControllerMutationQuotaManagerTest.testThrottleTime
    assert [TokenBucket.throttle_ms(credits, 10) for credits in (0, -5, -10)] == [0, 500, 1000]
    assert TokenBucket.throttle_ms(-0.0025, 1) == 3  # Java's Math.round: 2.5 -> 3 (Python's round gives 2)


def test_a_strict_quota_takes_any_topic_until_in_debt_then_refuses_and_throttles() -> None:
    clock = _Clock()
    quota = _quotas(10, clock).mutation_quota("alice", "app", strict=True)  # burst 10 x 1 s x 10 = 100
    quota.record(90)
    assert quota.throttle_ms() == 0
    quota.record(90)  # 10 credits left: accepted, taking the bucket to -80, and still no throttle
    assert quota.throttle_ms() == 0
    with pytest.raises(ThrottlingQuotaExceededError) as refused:
        quota.record(90)
    assert (refused.value.throttle_ms, str(refused.value)) == (8000, "The throttling quota has been exceeded.")
    assert quota.throttle_ms() == 8000
    clock.now_ms += 5000
    assert quota.throttle_ms() == 3000  # the answer's throttle time is what is left of it


def test_a_permissive_quota_takes_everything_and_throttles_once_in_debt() -> None:
    clock = _Clock()
    quota = _quotas(10, clock).mutation_quota("alice", "app", strict=False)
    quota.record(90)
    assert quota.throttle_ms() == 0
    quota.record(90)
    assert quota.throttle_ms() == 8000
    quota.record(90)
    assert quota.throttle_ms() == 17000
    clock.now_ms += 5000
    assert quota.throttle_ms() == 12000


def test_requests_of_one_client_share_one_bucket_and_a_refused_topic_is_not_counted() -> None:
    # ControllerMutationQuotaManagerTest.testControllerMutationQuotaViolation
    clock = _Clock()
    quotas = _quotas(10, clock)
    for _ in range(10):  # within the rate: never throttled
        quotas.mutation_quota("alice", "app", strict=True).record(10)
        clock.now_ms += 1000
    quotas.mutation_quota("bob", "app", strict=True).record(110)  # another user, same client-id entity
    second = quotas.mutation_quota("alice", "app", strict=True)
    with pytest.raises(ThrottlingQuotaExceededError):
        second.record(110)
    assert second.throttle_ms() == 1000
    clock.now_ms += 1000
    quotas.mutation_quota("alice", "app", strict=True).record(110)  # back at zero credits: accepted


def test_a_client_without_the_quota_is_unbounded() -> None:
    clock = _Clock()
    quotas = _quotas(1, clock)
    quota = quotas.mutation_quota("alice", "other-app", strict=True)
    assert quota is UNBOUNDED and not quota.bounded
    for _ in range(3):
        quota.record(1000)
    assert quota.throttle_ms() == 0
    assert mutation_quota(strict_since=6) is UNBOUNDED  # no request being metered


def test_the_running_request_gets_its_quota_and_its_answer_carries_the_throttle() -> None:
    clock = _Clock()
    quotas = _quotas(2, clock, samples=2)  # burst 4
    types = response_types(19, 7)
    asked: list[MutationQuota] = []

    async def create_topics() -> bytes:
        quota = mutation_quota(strict_since=6)
        asked.append(quota)
        quota.record(5)  # accepted: -1 credits
        await asyncio.sleep(0)  # the next step runs with the meter too
        with pytest.raises(ThrottlingQuotaExceededError):
            mutation_quota(strict_since=6).record(1)
        response = make(types.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=())
        return encode_response(7, response)

    throttled: list[int] = []
    meter = RequestMeter(quotas, "alice", "app", api_key=19, api_version=7)
    answer = asyncio.run(meter.run(create_topics, throttled.append))
    assert asked[0].strict and asked[0].bounded
    _, body = decode_response(19, 7, bytes(answer)[4:])
    assert body.throttle_time.total_seconds() == 0.5  # 1 credit of debt at 2 per second
    assert throttled == [500]  # the connection sits it out
    assert quotas.throttled == {(KEY, "", "app"): (1, 500)}
    old = RequestMeter(quotas, "alice", "app", api_key=19, api_version=5)
    assert not asyncio.run(_quota_of(old)).strict  # CreateTopics v5: permissive


async def _quota_of(meter: RequestMeter) -> MutationQuota:
    async def handler() -> MutationQuota:
        return mutation_quota(strict_since=6)

    quota: MutationQuota = await meter.run(handler, lambda _: None)
    return quota
