"""The `barnabas` sink: Spark's Kafka sink contract (KafkaWriter, KafkaWriteTask) on confluent-kafka.

Rules this module keeps:
- Input columns as KafkaWriter.validateQuery wants them: `value` (string or binary) required; `key`
  (string or binary), `topic` (string), `partition` (int) and `headers` (array<struct<key, value>>)
  optional. The `topic` option, when given, wins over a `topic` column.
- At-least-once, as Spark's Kafka sink: each task produces its rows and waits for every delivery
  report before it reports success; a failed task or batch may be retried and write rows again.
- Save mode overwrite is refused: a log can only be appended to.
- Tasks receive Arrow batches (DataSourceArrowWriter), so rows become Python objects one column at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from .options import OptionError, SinkOptions, parse_sink_options

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["BatchWriter", "StreamWriter", "batch_writer", "stream_writer"]

# Producer settings; the user's kafka.* options override them. murmur2_random is the Java client's default
# partitioner (murmur2 of the key, any partition for null keys), so keyed rows land where Spark's JVM sink
# puts them; librdkafka's own default hashes with CRC32. The rest is for throughput.
_PRODUCER_DEFAULTS = {
    "partitioner": "murmur2_random",
    "linger.ms": "5",
    "batch.size": str(1 << 20),
    "queue.buffering.max.kbytes": str(1 << 20),
}
_FLUSH_TIMEOUT_S = 120.0


class SinkError(RuntimeError):
    """A write Spark's Kafka sink would refuse or that a broker failed."""


@dataclass(frozen=True)
class WrittenRows(WriterCommitMessage):
    """A task's commit message: how many records the broker acknowledged."""

    count: int


def check_input_schema(schema: StructType, topic_option: str | None) -> None:
    """KafkaWriter.validateQuery: the columns a Kafka sink accepts.

    Raises:
        OptionError: a required column is missing or a column has the wrong type.
    """
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    types = {field.name.lower(): field.dataType for field in schema.fields}
    if topic_option is None and "topic" not in types:
        raise OptionError(
            "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
        )
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise OptionError(f"Topic type must be a StringType, got {types['topic'].simpleString()}")
    if "value" not in types:
        raise OptionError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], StringType | BinaryType):
            raise OptionError(f"{name} attribute type must be a StringType or BinaryType")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError("partition attribute type must be an IntegerType")
    if "headers" in types:
        headers = types["headers"]
        element = headers.elementType if isinstance(headers, ArrayType) else None
        if not (
            isinstance(element, StructType)
            and [f.name for f in element.fields] == ["key", "value"]
            and isinstance(element.fields[0].dataType, StringType)
            and isinstance(element.fields[1].dataType, BinaryType)
        ):
            raise OptionError("headers attribute type must be an ArrayType(StructType(key: string, value: binary))")


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        # _LEGACY_ERROR_TEMP_3081, KafkaSourceProvider.createRelation.
        raise OptionError(
            "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and ErrorIfExists (default)."
        )


def batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> BatchWriter:
    _refuse_overwrite(overwrite)
    sink = parse_sink_options(options)
    check_input_schema(schema, sink.topic)
    return BatchWriter(sink)


def stream_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> StreamWriter:
    _refuse_overwrite(overwrite)
    sink = parse_sink_options(options)
    check_input_schema(schema, sink.topic)
    return StreamWriter(sink)


def produce_batches(sink: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WrittenRows:
    """Produce every row and wait for all delivery reports (KafkaWriteTask.execute, then close)."""
    from confluent_kafka import Producer

    producer = Producer({**_PRODUCER_DEFAULTS, **sink.client_config})
    failures: list[str] = []
    written = 0

    def delivered(error: Any, _message: Any) -> None:
        nonlocal written
        if error is not None:
            failures.append(str(error))
        else:
            written += 1

    for batch in batches:
        _produce_batch(producer, sink.topic, batch, delivered)
        if failures:
            break
    remaining = producer.flush(_FLUSH_TIMEOUT_S)
    if failures:
        raise SinkError(f"{len(failures)} records were not written; first error: {failures[0]}")
    if remaining:
        raise SinkError(f"{remaining} records were not acknowledged within {_FLUSH_TIMEOUT_S:.0f} s")
    return WrittenRows(written)


def _produce_batch(producer: Any, topic_option: str | None, batch: pa.RecordBatch, delivered: Any) -> None:
    names = {name.lower(): index for index, name in enumerate(batch.schema.names)}

    def column(name: str) -> list[Any]:
        index = names.get(name)
        return batch.column(index).to_pylist() if index is not None else [None] * batch.num_rows

    values, keys, partitions, headers = column("value"), column("key"), column("partition"), column("headers")
    topics = [topic_option] * batch.num_rows if topic_option is not None else column("topic")
    for value, key, topic, partition, header in zip(values, keys, topics, partitions, headers, strict=True):
        if topic is None:
            raise SinkError("null topic present in the data. Use the topic option for setting a topic.")
        kafka_headers = [(h["key"], h["value"]) for h in header] if header else None
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key,
                    partition=-1 if partition is None else partition,
                    headers=kafka_headers,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)


class BatchWriter(DataSourceArrowWriter):
    """`df.write.format("barnabas")`: each task produces its rows."""

    def __init__(self, sink: SinkOptions) -> None:
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self.sink, iterator)


class StreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("barnabas")`: each micro-batch's tasks produce their rows."""

    def __init__(self, sink: SinkOptions) -> None:
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self.sink, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to publish: the tasks' records are already acknowledged (at-least-once)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records of failed tasks stay written, as with Spark's Kafka sink."""
