"""The broker process answers SIGUSR1 with a dump of its asyncio tasks, and keeps serving."""

from __future__ import annotations

import signal
import time

from confluent_kafka.admin import AdminClient

from tests.support.broker_process import BrokerProcess


def test_sigusr1_logs_every_task_and_the_broker_goes_on(broker: BrokerProcess) -> None:
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while "SIGUSR1:" not in broker.log_text():
        assert time.monotonic() < deadline, "no task dump within 30 s:\n" + broker.log_text()
        time.sleep(0.05)
    dump = broker.log_text().split("SIGUSR1:", 1)[1]
    assert "log maintenance" in dump and "_maintain" in dump  # a task's name and the line it waits on
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert list(metadata.brokers) == [0]
