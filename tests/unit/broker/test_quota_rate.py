"""Kafka's quota arithmetic (Rate over sampled windows, QuotaUtils.throttleTime) and which quota applies to whom."""

from __future__ import annotations

from barnabas.broker.client_quotas import ClientQuotas
from barnabas.broker.quota_rate import Rate
from barnabas.cluster.client_quotas import CLIENT_ID, USER, QuotaEntity


def test_a_first_burst_is_measured_over_samples_minus_one_whole_windows() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(10_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 1000.0  # 10,000 over ten windows, not over no time at all


def test_the_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    rate = Rate(samples=2, window_ms=1000)
    rate.record(300, now_ms=0)  # 300 per second against a bound of 100
    assert rate.throttle_ms(100, 0) == 2000  # (300 - 100) / 100 * 1000 ms
    rate.record(1, now_ms=2000)  # after waiting it out the old window has expired
    assert rate.measure(2000) < 100


def test_windows_roll_over_and_old_samples_expire() -> None:
    rate = Rate(samples=2, window_ms=1000)
    for second in range(5):
        rate.record(100, now_ms=second * 1000)
    assert 90 <= rate.measure(4000) <= 200
    assert rate.measure(10_000) == 0.0  # nothing recorded for samples * window: purged


class _Store:
    """The quota store's read side, filled directly."""

    def __init__(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        self._quotas = quotas
        self.generation = 1

    def entries(self) -> dict[QuotaEntity, dict[str, float]]:
        return self._quotas

    def get(self, entity: QuotaEntity, key: str) -> float | None:
        return self._quotas.get(entity, {}).get(key)


def _quotas(entries: dict[QuotaEntity, dict[str, float]]) -> ClientQuotas:
    return ClientQuotas(_Store(entries), samples=2, window_s=1)  # type: ignore[arg-type]


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    key = "producer_byte_rate"
    levels: list[tuple[QuotaEntity, tuple[str, str]]] = [
        (((CLIENT_ID, "app"), (USER, "alice")), ("alice", "app")),
        (((CLIENT_ID, None), (USER, "alice")), ("alice", "app")),
        (((USER, "alice"),), ("alice", "")),
        (((CLIENT_ID, "app"), (USER, None)), ("alice", "app")),
        (((CLIENT_ID, None), (USER, None)), ("alice", "app")),
        (((USER, None),), ("alice", "")),
        (((CLIENT_ID, "app"),), ("", "app")),
        (((CLIENT_ID, None),), ("", "app")),
    ]
    for index, (_, tags) in enumerate(levels):
        # Every less specific level is configured too: this one must still win.
        configured = {e: {key: float(i + 1)} for i, (e, _) in enumerate(levels[index:], start=index)}
        assert _quotas(configured).quota(key, "alice", "app") == (float(index + 1), (key, *tags))


def test_each_quota_key_is_looked_up_on_its_own_and_no_quota_measures_nothing() -> None:
    quotas = _quotas(
        {((USER, "alice"),): {"consumer_byte_rate": 5.0}, ((CLIENT_ID, None),): {"producer_byte_rate": 7.0}}
    )
    assert quotas.quota("producer_byte_rate", "alice", "app") == (7.0, ("producer_byte_rate", "", "app"))
    assert quotas.quota("request_percentage", "alice", "app") is None
    assert quotas.record("request_percentage", "alice", "app", 50.0) == 0
    assert not _quotas({}).active


def test_clients_matched_by_one_entity_share_one_rate_and_throttles_are_counted() -> None:
    quotas = _quotas({((USER, "alice"),): {"producer_byte_rate": 100.0}})
    quotas.clock_ms = lambda: 0
    assert quotas.record("producer_byte_rate", "alice", "one", 60) == 0
    throttle_ms = quotas.record("producer_byte_rate", "alice", "two", 60)  # 120 per s over the shortest window
    assert throttle_ms > 0
    assert quotas.throttled == {("producer_byte_rate", "alice", ""): (1, throttle_ms)}
