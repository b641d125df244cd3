"""The `barnabas` data source: Spark's Kafka source as a PySpark Python Data Source.

Rules this module keeps:
- Options, schema and offsets are Spark's Kafka source's (KafkaSourceProvider, KafkaMicroBatchStream).
- Planning (offset lookups, ranges) happens in the driver-side reader; `read()` runs on executors and
  only reads its range, so the reader holds no client when Spark pickles it.
- One input partition per Kafka partition with new offsets; more when minPartitions asks.
- Streaming: maxOffsetsPerTrigger is a ReadMaxRows limit, and Trigger.AvailableNow reads up to the
  offsets that were latest when it was prepared, in limited steps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from .client import OffsetReader, read_range
from .offsets import (
    DataLossError,
    OffsetRange,
    TopicPartition,
    new_records,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    split_ranges,
)
from .options import SourceOptions, parse_source_options
from .schema import kafka_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter
    from pyspark.sql.types import StructType

__all__ = ["BarnabasDataSource", "KafkaInputPartition"]

FORMAT_NAME = "barnabas"


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: a range of one Kafka partition."""

    offset_range: OffsetRange


class BarnabasDataSource(DataSource):
    """Format `barnabas`: read and write Kafka topics with Spark's Kafka source options and schema."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        include_headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return kafka_schema(include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import batch_writer

        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import stream_writer

        return stream_writer(self.options, schema, overwrite)


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, KafkaInputPartition):
        # PySpark plans one `InputPartition(None)` when a batch has no ranges (an empty topic).
        return iter(())
    return read_range(options, partition.offset_range)


def _fail_or_warn(problems: list[str], fail_on_data_loss: bool) -> None:
    """KafkaMicroBatchStream.reportDataLoss: fail, or carry on (Spark logs a warning)."""
    if problems and fail_on_data_loss:
        advice = (
            "If you want your streaming query to not fail on such cases, set the source option "
            "'failOnDataLoss' to 'false'."
        )
        raise DataLossError(f"{problems[0]} {advice}")


class BatchReader(DataSourceReader):
    """KafkaBatch: the ranges between the resolved starting and ending offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        reader = OffsetReader(self.options)
        topic_partitions = reader.partitions()
        start = reader.resolve(self.options.starting, topic_partitions, starting=True)
        end = reader.resolve(self.options.ending, topic_partitions, starting=False)
        ranges: list[OffsetRange] = []
        for tp in topic_partitions:
            first, last = start[tp], end[tp]
            if first > last:
                # KafkaOffsetReader.getOffsetRangesFromResolvedOffsets
                raise ValueError(
                    f"The start offset ({first}) of {tp} is greater than its end offset ({last}) after "
                    "resolving the specified offsets and timestamps. Please correct your options."
                )
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
        planned = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        return [KafkaInputPartition(r) for r in planned]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """KafkaMicroBatchStream: offsets in Kafka's JSON, rate limits, Trigger.AvailableNow."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._offset_reader: OffsetReader | None = None
        self._available_now: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._last_trigger_s: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get only the options: the admin client stays with the planner.
        return {"options": self.options, "_offset_reader": None, "_available_now": None, "_latest": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _last_trigger_s=None)

    @property
    def _reader(self) -> OffsetReader:
        if self._offset_reader is None:
            self._offset_reader = OffsetReader(self.options)
        return self._offset_reader

    def initialOffset(self) -> dict[str, Any]:
        reader = self._reader
        offsets = reader.resolve(self.options.starting, reader.partitions(), starting=True)
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # KafkaMicroBatchStream.prepareForTriggerAvailableNow: the run ends at today's latest offsets.
        reader = self._reader
        self._available_now = reader.latest(reader.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        reader = self._reader
        begin = offsets_from_json(start)
        # Under Trigger.AvailableNow the run ends at the offsets that were latest when it was prepared.
        available_now = self._available_now
        latest = dict(available_now) if available_now is not None else reader.latest(reader.partitions())
        self._latest = latest
        new = [tp for tp in latest if tp not in begin]
        earliest = reader.earliest(new) if new else {}
        if available_now is None and self._delay_batch(begin, latest, earliest):
            return start
        end = rate_limit(limit.max_rows, begin, latest, earliest) if isinstance(limit, ReadMaxRows) else latest
        return offsets_to_json(end)

    def _delay_batch(
        self, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int], earliest: dict[TopicPartition, int]
    ) -> bool:
        """minOffsetsPerTrigger: wait for enough records, but no longer than maxTriggerDelay (delayBatch).

        PySpark's stream reader takes one ReadLimit, so the minimum is checked here rather than passed to
        Spark as a CompositeReadLimit; Trigger.AvailableNow ignores it, as Spark's Kafka source does.
        """
        minimum = self.options.min_offsets_per_trigger
        if minimum is None:
            return False
        now = time.monotonic()
        last = self._last_trigger_s
        # The first batch never waits (Spark's lastTriggerMillis starts at 0).
        if last is None or (now - last) * 1000 >= self.options.max_trigger_delay_ms:
            self._last_trigger_s = now
            return False
        if new_records(begin, latest, earliest) < minimum:
            return True
        self._last_trigger_s = now
        return False

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in finish if tp not in begin]
        earliest = self._reader.earliest(new) if new else {}
        ranges, problems = plan_ranges(begin, finish, earliest)
        _fail_or_warn(problems, self.options.fail_on_data_loss)
        planned = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        return [KafkaInputPartition(r) for r in planned]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: recovery uses Spark's checkpoint, as with the JVM Kafka source."""

    def stop(self) -> None:
        self._offset_reader = None
