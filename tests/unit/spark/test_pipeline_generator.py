"""The telemetry generator keeps the rules the pipeline's expected output is computed from."""

from __future__ import annotations

import json
from datetime import timedelta

from barnabas.spark.pipeline.errors import reading_error
from barnabas.spark.pipeline.generator import MALFORMED_KINDS, Kind, TelemetrySpec, telemetry

SPEC = TelemetrySpec(readings=3000, seed=3, malformed_rate=0.05)


def test_same_spec_same_records_and_another_seed_differs() -> None:
    assert list(telemetry(SPEC)) == list(telemetry(SPEC))
    other = TelemetrySpec(readings=3000, seed=4, malformed_rate=0.05)
    assert [r.value for r in telemetry(other)] != [r.value for r in telemetry(SPEC)]


def test_every_reading_once_and_duplicates_repeat_an_earlier_one_byte_for_byte() -> None:
    records = list(telemetry(SPEC))
    sent: dict[str, bytes] = {}
    duplicates = 0
    for record in records:
        if record.kind in (Kind.READING, Kind.CLOSING):
            assert record.reading is not None
            assert record.reading.reading_id not in sent
            sent[record.reading.reading_id] = record.value
        elif record.kind is Kind.DUPLICATE:
            assert record.reading is not None
            assert sent.get(record.reading.reading_id) == record.value, "duplicate before its original"
            duplicates += 1
    assert len([r for r in records if r.kind is Kind.READING]) == SPEC.readings
    assert 0.03 * SPEC.readings < duplicates < 0.07 * SPEC.readings


def test_late_readings_trail_the_newest_by_less_than_the_lateness_bound() -> None:
    bound = timedelta(seconds=SPEC.max_late_ticks * SPEC.tick_seconds + 1)
    newest = None
    late = 0
    for record in telemetry(SPEC):
        if record.reading is None or record.kind is Kind.CLOSING:
            continue
        ts = record.reading.ts
        if newest is not None and ts < newest:
            assert newest - ts < bound
            late += 1
        newest = ts if newest is None else max(newest, ts)
    assert late > 0


def test_stream_ends_with_one_closing_reading_per_device_past_every_window() -> None:
    records = list(telemetry(SPEC))
    closing = records[-SPEC.devices :]
    assert {r.kind for r in closing} == {Kind.CLOSING}
    assert len({r.reading.device_id for r in closing if r.reading}) == SPEC.devices
    last = max(r.reading.ts for r in records if r.reading and r.kind is not Kind.CLOSING)
    assert all(r.reading and r.reading.ts == last + timedelta(seconds=SPEC.close_after_seconds) for r in closing)


def test_malformed_lines_cover_every_kind_and_each_explains_itself() -> None:
    malformed = [r for r in telemetry(SPEC) if r.kind is Kind.MALFORMED]
    assert {r.malformed_kind for r in malformed} == set(MALFORMED_KINDS)
    expected = {
        "truncated": "malformed JSON: ",
        "not-json": "malformed JSON: ",
        "wrong-type": "field 'value': expected a number",
        "missing-field": "missing field(s): device_id",
        "bad-timestamp": "field 'ts': not an ISO-8601 timestamp",
        "not-an-object": "not a JSON object: got a JSON list",
    }
    for record in malformed:
        assert record.malformed_kind is not None
        assert reading_error(record.value).startswith(expected[record.malformed_kind]), record


def test_reading_error_edge_cases() -> None:
    assert reading_error(None) == "record has no value"
    assert reading_error(b"\xff\xfe").startswith("not UTF-8: ")
    assert reading_error(b'{"reading_id": 5}').startswith("missing field(s): device_id, ts, metric, value")
    valid = next(r for r in telemetry(SPEC) if r.kind is Kind.READING)
    # Python finds nothing wrong with a valid reading: Spark refused it for a reason of its own.
    assert reading_error(valid.value) == "does not match the reading schema"
    fields = json.loads(valid.value)
    wrong_type = json.dumps({**fields, "device_id": 7}).encode()
    assert reading_error(wrong_type) == "field 'device_id': expected a string, got 7"
