"""PartitionLog against a model: appends, rolls, flushes, truncations, high watermark moves, and crashes.

A model holds the batches the log should hold (base offset, values, size) and the segment each went
to. Every step is one of the log's operations on real files, with small segments so that rolls are
frequent; a crash drops the log as a killed process would (``crash``), then cuts the newest segment
anywhere above what the recovery point says is on disk, as a host crash loses writes never
flushed, and reopens it with the recovery point and high watermark its checkpoints would hold.

Invariants after every step: offsets are dense from the log start and increase; a read from the log
start returns exactly the model's records, through the high watermark too; the high watermark lies
between the log start and the log end, and the recovery point at or below the log end.

``make fuzz`` runs this long (``tests/fuzz/profiles.py``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from barnabas.log import LogConfig, PartitionLog
from barnabas.log.segment_file import set_max_open
from barnabas.protocol import decode_batch_records, iter_batch_headers
from tests.fuzz.profiles import stateful_settings

from .batches import T0, make_batch
from .conftest import crash

#: Small segments (a few batches each) roll often; every batch gets an index entry.
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=0)


@dataclass(frozen=True)
class Batch:
    base: int
    values: tuple[bytes, ...]
    size: int

    @property
    def next_offset(self) -> int:
        return self.base + len(self.values)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="log-stateful-"))
        self.directory = self.root / "orders-0"
        self.now = T0
        self.log = PartitionLog.open(self.directory, CONFIG, self.now, hw_follows_log_end=False)
        self.batches: list[Batch] = []
        self.appended = 0

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def log_end(self) -> int:
        return self.batches[-1].next_offset if self.batches else self.log.log_start_offset

    # -- rules --------------------------------------------------------------------------------------

    @rule(count=st.integers(1, 5), value_size=st.integers(0, 40))
    def append(self, count: int, value_size: int) -> None:
        batch = make_batch(count, timestamp=self.now, value_size=value_size, tag=f"{self.appended}-")
        self.appended += 1
        size = len(batch)
        result = self.log.append_as_leader(batch, 0, self.now)
        assert result.base_offset == self.log_end, "offsets continue from the log end"
        values = tuple(record.value or b"" for record in decode_batch_records(batch))
        self.batches.append(Batch(result.base_offset, values, size))

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now)

    @rule()
    def flush(self) -> None:
        self.log.flush(self.now)
        assert self.log.recovery_point == self.log_end

    @rule(fraction=st.floats(0, 1))
    def advance_high_watermark(self, fraction: float) -> None:
        """Replication moves the high watermark (only forward, as acks arrive)."""
        start, end = self.log.high_watermark, self.log_end
        self.log.high_watermark = start + round((end - start) * fraction)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log.log_start_offset, self.log_end), label="truncate to")
        changed = self.log.truncate_to(offset, self.now)
        assert changed == (offset < self.log_end)
        self.batches = [b for b in self.batches if b.next_offset <= offset]  # the batch holding it goes whole

    @rule(data=st.data())
    def crash_and_recover(self, data: st.DataObject) -> None:
        recovery_point, high_watermark = self.log.recovery_point, self.log.high_watermark
        active = self.log.active_segment
        crash(self.log)
        in_active = [b for b in self.batches if b.base >= active.base_offset]
        durable = sum(b.size for b in in_active if b.next_offset <= recovery_point)
        size = active.path.stat().st_size
        assert size == sum(b.size for b in in_active), "the active segment holds what was appended to it"
        keep = data.draw(st.integers(durable, size), label="bytes left in the newest segment")
        with active.path.open("r+b") as file:
            file.truncate(keep)
        lost, position = [], 0
        for batch in in_active:
            position += batch.size
            if position > keep:
                lost.append(batch)
        self.batches = [b for b in self.batches if b not in lost]
        self.log = PartitionLog.open(
            self.directory,
            CONFIG,
            self.now,
            recovery_point=recovery_point,
            high_watermark=high_watermark,
            hw_follows_log_end=False,
        )
        assert self.log.high_watermark == min(high_watermark, self.log_end), "the checkpointed high watermark"

    # -- invariants -----------------------------------------------------------------------------------

    @invariant()
    def offsets_and_watermarks(self) -> None:
        log = self.log
        assert log.log_end_offset == self.log_end
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset

    @invariant()
    def reads_return_the_model(self) -> None:
        expected = [(b.base + i, value) for b in self.batches for i, value in enumerate(b.values)]
        assert self.read_all(None) == expected, "a read from the log start returns what the model holds"
        committed = [b for b in self.batches if b.next_offset <= self.log.high_watermark]
        expected = [(b.base + i, value) for b in committed for i, value in enumerate(b.values)]
        assert self.read_all(self.log.high_watermark) == expected, "a consumer reads whole batches below the HW"

    def read_all(self, max_offset: int | None) -> list[tuple[int, bytes]]:
        records: list[tuple[int, bytes]] = []
        offset, end = self.log.log_start_offset, self.log.log_end_offset
        while offset < end:
            result = self.log.read(offset, 1 << 20, max_offset=max_offset)
            if not result.records:
                break
            data = bytes(result.records)
            for position, header in iter_batch_headers(data):
                for record in decode_batch_records(data[position : position + header.size]):
                    records.append((record.offset, record.value or b""))
            assert result.next_offset > offset, "a read moves forward"
            offset = result.next_offset
        offsets = [o for o, _ in records]
        assert offsets == list(range(self.log.log_start_offset, self.log.log_start_offset + len(offsets)))
        return records


LogMachine.TestCase.settings = stateful_settings(max_examples=100, step_count=50)
TestLogAgainstAModel = LogMachine.TestCase


class LogMachineOnOneDescriptor(LogMachine):
    """The same, with a segment descriptor budget of one: every other segment reopens its file to be used."""

    def __init__(self) -> None:
        set_max_open(1)
        super().__init__()

    def teardown(self) -> None:
        super().teardown()
        set_max_open(None)


LogMachineOnOneDescriptor.TestCase.settings = stateful_settings(max_examples=50, step_count=50)
TestLogAgainstAModelOnOneDescriptor = LogMachineOnOneDescriptor.TestCase
