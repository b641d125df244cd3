"""The Kafka client side of the source: metadata, offset lookups and reads of `[start, end)` ranges.

Rules this module keeps:
- confluent-kafka (librdkafka) underneath, so the source works against Apache Kafka as well as barnabas.
- Offsets are looked up in batches with the admin client's ListOffsets (KafkaOffsetReaderAdmin's way).
- A read assigns one partition at an explicit offset (no group membership, no commits) and yields exactly
  the records of `[start, end)`: the same range always gives the same rows, which is what lets Spark
  replay a batch from its write-ahead log.
- Records below the log start offset are data loss: fatal with failOnDataLoss, else skipped
  (KafkaDataConsumer.getAvailableOffsetRange).
- Reads use read_uncommitted, like the Java consumer Spark configures.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .offsets import DataLossError, OffsetRange, TopicPartition
from .options import (
    Assign,
    GlobalTimestamp,
    OffsetBound,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["OffsetReader", "read_range"]

# Topics a pattern subscription skips, as the Java consumer's exclude.internal.topics=true does.
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_REQUEST_TIMEOUT_S = 30.0
# Fetch settings for reading ranges: librdkafka's own (1 MiB per partition per fetch, 64 MiB queued). Larger
# fetches measured slower on the 2-core test VM (32 MiB per partition: 90k rows/s against 160k for 1 KiB
# records), probably because each response is a fresh allocation whose pages must be faulted in.
# The user's kafka.* options win.
_READ_DEFAULTS: dict[str, str] = {}
# Rows per Arrow batch. Python worker CPU per 500k 1 KiB records measured 1.5 s at 1,000 and 2,000 rows,
# 1.6 s at 10,000 and 2.0 s at 50,000 (probably cache: a 2 MB batch is still cached when it is written out).
ROWS_PER_BATCH = 2_000

DATA_LOSS_ADVICE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was aged "
    "out by Kafka or the topic may have been deleted before all the data in the topic was processed. If you "
    "don't want your streaming query to fail on such cases, set the source option 'failOnDataLoss' to 'false'."
)


class OffsetReader:
    """Partition discovery and offset lookups for the planner (KafkaOffsetReader's job)."""

    def __init__(self, options: SourceOptions) -> None:
        from confluent_kafka.admin import AdminClient

        self._options = options
        self._admin = AdminClient(dict(options.client_config))

    def partitions(self) -> list[TopicPartition]:
        """The partitions the strategy names that exist now, sorted."""
        strategy = self._options.strategy
        if isinstance(strategy, Assign):
            return sorted(set(strategy.partitions))
        topics = self._admin.list_topics(timeout=_REQUEST_TIMEOUT_S).topics
        if isinstance(strategy, Subscribe):
            wanted = [name for name in strategy.topics if name in topics]
        else:
            assert isinstance(strategy, SubscribePattern)
            wanted = [name for name in topics if name not in _INTERNAL_TOPICS and strategy.matches(name)]
        return sorted(
            TopicPartition(name, partition)
            for name in wanted
            if topics[name].error is None
            for partition in topics[name].partitions
        )

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]  # confluent-kafka leaves it unannotated
        return self._list_offsets(dict.fromkeys(partitions, spec))

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # confluent-kafka leaves it unannotated
        return self._list_offsets(dict.fromkeys(partitions, spec))

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int], *, starting: bool) -> dict[TopicPartition, int]:
        """The earliest offset whose timestamp is at or after each given one (KafkaConsumer.offsetsForTimes).

        A partition with no such record gets its latest offset when the query ends there, or starts
        there with startingOffsetsByTimestampStrategy=latest; otherwise it is an error, as in Spark.
        """
        from confluent_kafka.admin import OffsetSpec

        found = self._list_offsets({tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()})
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing:
            if starting and not self._options.timestamp_no_match_latest:
                tp = missing[0]
                raise ValueError(
                    f"No offset matched from request of topic-partition {tp} and timestamp {timestamps[tp]}."
                )
            found.update(self.latest(missing))
        return found

    def resolve(
        self, bound: OffsetBound, partitions: list[TopicPartition], *, starting: bool
    ) -> dict[TopicPartition, int]:
        """Concrete offsets for a starting or ending bound over `partitions`.

        Raises:
            ValueError: specific offsets that do not name exactly the partitions (KafkaOffsetReader's assert),
                or a starting timestamp with no match.
        """
        if bound == "earliest":
            return self.earliest(partitions)
        if bound == "latest":
            return self.latest(partitions)
        if isinstance(bound, GlobalTimestamp):
            return self.for_timestamps(dict.fromkeys(partitions, bound.timestamp), starting=starting)
        if isinstance(bound, SpecificTimestamps):
            self._check_covers(bound.timestamps, partitions)
            return self.for_timestamps(bound.timestamps, starting=starting)
        assert isinstance(bound, SpecificOffsets)
        self._check_covers(bound.offsets, partitions)
        resolved = dict(bound.offsets)
        earliest = [tp for tp, offset in resolved.items() if offset == -2]
        latest = [tp for tp, offset in resolved.items() if offset == -1]
        resolved.update(self.earliest(earliest) if earliest else {})
        resolved.update(self.latest(latest) if latest else {})
        return resolved

    def _check_covers(self, specified: Mapping[TopicPartition, int], partitions: list[TopicPartition]) -> None:
        if set(specified) != set(partitions):
            raise ValueError(
                "If startingOffsets contains specific offsets, you must specify all TopicPartitions.\n"
                "Use -1 for latest, -2 for earliest.\n"
                f"Specified: {sorted(map(str, specified))} Assigned: {sorted(map(str, partitions))}"
            )

    def _list_offsets(self, specs: Mapping[TopicPartition, Any]) -> dict[TopicPartition, int]:
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        if not specs:
            return {}
        futures = self._admin.list_offsets(
            {KafkaTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()},
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            request_timeout=_REQUEST_TIMEOUT_S,
        )
        return {
            TopicPartition(ktp.topic, ktp.partition): int(future.result().offset) for ktp, future in futures.items()
        }


def consumer_config(options: SourceOptions) -> dict[str, str]:
    """Executor consumer settings (KafkaSourceProvider.kafkaParamsForExecutors), user kafka.* options first."""
    config = {**_READ_DEFAULTS, **options.client_config}
    config.setdefault("group.id", f"{options.group_id_prefix}-{uuid.uuid4()}-executor")
    config.update(
        {
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "error",
            "isolation.level": "read_uncommitted",
        }
    )
    return config


def read_range(
    options: SourceOptions, offset_range: OffsetRange, rows_per_batch: int = ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """Yield the records of `[start, end)` of one partition as Arrow batches.

    Raises:
        DataLossError: with failOnDataLoss, when part of the range is no longer (or not yet) in the log.
        TimeoutError: no progress within kafkaConsumer.pollTimeoutMs.
    """
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    from .arrow import messages_to_batch

    topic, partition = offset_range.topic, offset_range.partition
    consumer = Consumer(consumer_config(options))
    try:
        low, high = consumer.get_watermark_offsets(
            KafkaTopicPartition(topic, partition), timeout=_REQUEST_TIMEOUT_S, cached=False
        )
        start, end = _available_range(offset_range, low, high, options.fail_on_data_loss)
        if start >= end:
            return
        consumer.assign([KafkaTopicPartition(topic, partition, start)])
        next_offset = start
        timeout_s = options.poll_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        while next_offset < end:
            want = max(1, min(rows_per_batch, end - next_offset))
            messages = consumer.consume(want, timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            good = [m for m in messages if m.error() is None]
            finished = False
            if len(good) != len(messages):
                finished = _handle_events(messages, end, f"{topic}-{partition}", next_offset)
            if good:
                if _offset(good[-1]) >= end:
                    good = [m for m in good if _offset(m) < end]
                    finished = True
                if good:
                    next_offset = _offset(good[-1]) + 1
                    deadline = time.monotonic() + timeout_s
                    yield messages_to_batch(good, topic, partition, options.include_headers)
            if finished:
                break
            if time.monotonic() > deadline:
                waited = options.poll_timeout_ms
                raise TimeoutError(
                    f"Cannot fetch record for offset {next_offset} of {topic}-{partition} in {waited} ms"
                )
    finally:
        consumer.close()


def _offset(message: Any) -> int:
    offset: int = message.offset()
    return offset


def _handle_events(messages: list[Any], end: int, where: str, next_offset: int) -> bool:
    """Act on the events among consumed messages; True once the end of the log is at or past `end`."""
    from confluent_kafka import KafkaError, KafkaException

    finished = False
    for message in messages:
        error = message.error()
        if error is None:
            continue
        if error.code() == KafkaError._PARTITION_EOF:
            finished = finished or message.offset() >= end
        elif error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            raise DataLossError(f"Cannot fetch offset {next_offset} of {where}. {DATA_LOSS_ADVICE}")
        elif not error.retriable():
            raise KafkaException(error)
    return finished


def _available_range(offset_range: OffsetRange, low: int, high: int, fail_on_data_loss: bool) -> tuple[int, int]:
    """Clip a planned range to what the log holds; any clipping is data loss."""
    start, end = offset_range.start, offset_range.end
    where = f"{offset_range.topic}-{offset_range.partition}"
    if start < low:
        if fail_on_data_loss:
            raise DataLossError(
                f"Offsets [{start}, {min(low, end)}) of {where} are gone (log start {low}). {DATA_LOSS_ADVICE}"
            )
        start = low
    if end > high:
        if fail_on_data_loss:
            raise DataLossError(
                f"Offsets [{max(high, start)}, {end}) of {where} are not in the log (end {high}). {DATA_LOSS_ADVICE}"
            )
        end = high
    return start, end
