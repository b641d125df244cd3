"""Why a record is not a reading: the text a dead letter carries.

Spark decides which records are dead letters (`from_json` with the reading schema, see `transforms`);
this module only explains them, in words a person fixing the producer can act on. It runs in Spark's
Python workers, so it stays pure Python with no Spark import.
"""

from __future__ import annotations

import json
from datetime import datetime

REQUIRED_FIELDS = {"reading_id": str, "device_id": str, "ts": str, "metric": str, "value": float}


def reading_error(value: bytes | None) -> str:
    """The first reason `value` is not a telemetry reading, as one line."""
    if value is None:
        return "record has no value"
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8: {exc}"
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"malformed JSON: {exc}"
    if not isinstance(document, dict):
        return f"not a JSON object: got a JSON {type(document).__name__}"
    missing = [name for name in REQUIRED_FIELDS if document.get(name) is None]
    if missing:
        return f"missing field(s): {', '.join(missing)}"
    for name, expected in REQUIRED_FIELDS.items():
        found = document[name]
        if expected is float and (isinstance(found, bool) or not isinstance(found, int | float)):
            return f"field {name!r}: expected a number, got {json.dumps(found)}"
        if expected is str and not isinstance(found, str):
            return f"field {name!r}: expected a string, got {json.dumps(found)}"
    try:
        datetime.fromisoformat(document["ts"])
    except ValueError:
        return f"field 'ts': not an ISO-8601 timestamp: {json.dumps(document['ts'])}"
    return "does not match the reading schema"
