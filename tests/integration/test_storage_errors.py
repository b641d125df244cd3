"""A segment write that fails answers KAFKA_STORAGE_ERROR, then the broker halts, as Kafka's does.

The failure is real: the broker runs under ``prlimit --fsize`` (RLIMIT_FSIZE; CPython ignores
SIGXFSZ, so a write past the limit fails with EFBIG), with small indexes so that only the
segment grows. The write fails on the append writer thread; the produce's answer must say so.
The log dir is then offline and the broker halts (exit code 1, Kafka's LogDirFailureHandler);
started again, it has cut the log back to the batches that landed and serves on.
"""

from __future__ import annotations

import os
import shutil

import pytest
from kio.schema.errors import ErrorCode

from tests.support.broker_process import BrokerProcess
from tests.support.requests import (
    PRODUCE,
    batch,
    connect,
    create_topic,
    fetch,
    latest_offset_once_led,
    produce,
    produce_request,
    unique,
)

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)"),
]

FILE_SIZE_LIMIT = 3 << 20


class FileSizeLimitedBroker(BrokerProcess):
    def command(self) -> list[str]:
        return ["prlimit", f"--fsize={FILE_SIZE_LIMIT}", "--", *super().command()]


def test_a_failed_segment_write_answers_kafka_storage_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker = FileSizeLimitedBroker(tmp_path / "data", properties={"log.index.size.max.bytes": "8192"}).start()
    try:
        topic = unique("efbig")
        with connect(broker) as client:
            create_topic(client, topic)
            codes = []
            for _ in range(2 * FILE_SIZE_LIMIT // (512 << 10)):  # twice what the file may hold
                request = produce_request(topic, 0, batch(os.urandom(512 << 10)), 1)
                response = client.request(PRODUCE, 9, request, timeout=60)
                ((partition,),) = [t.partition_responses for t in response.responses]
                codes.append(partition.error_code)
                if partition.error_code != ErrorCode.none:
                    break
            assert codes[-1] == ErrorCode.kafka_storage_error, codes
            assert set(codes[:-1]) <= {ErrorCode.none}
            written = len(codes) - 1
        assert broker.process.wait_exit(30) == 1, "the broker halts once its only log dir failed"
        assert any("halting: log dir" in line for line in broker.output)
        assert not [line for line in broker.output if "unexpected error" in line]
        broker.start()  # the disk "fixed": the file size limit leaves room for a small batch
        with connect(broker) as client:
            assert latest_offset_once_led(client, topic) == written
            small = produce(client, topic, 0, batch(b"small"), acks=1)
            assert small.error_code == ErrorCode.none, small
            assert small.base_offset == written
            assert fetch(client, topic, 0, written).error_code == ErrorCode.none
    finally:
        broker.kill()
