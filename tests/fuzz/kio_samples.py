"""Every request and response class kio knows, and a filled-in instance of each, for walks and seed corpora.

``sample_entity`` sets every field, tagged ones included (kio writes a tagged field only when it
differs from its default), and gives every array ``width`` elements, so one encoded sample takes
every path of a schema. Importing this module also registers a hypothesis strategy for kio's
``Records`` type, the one kio leaves out, so ``st.from_type`` reaches every class.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid
from typing import Any

from hypothesis import strategies as st
from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_schema_field_type
from kio.static.primitive import Records

__all__ = ["ALL_SCHEMAS", "encode_body", "request_schemas", "sample_entity"]

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

_VALUES: dict[str, object] = {
    "string": "ab",
    "bytes": b"xyz",
    "records": b"rec",
    "bool": True,
    "uuid": uuid.UUID(int=7),
    "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=5),
    "datetime_i64": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    "float64": 1.5,
    "error_code": ErrorCode.none,
}


def _schemas(*loaders: Any) -> list[type[Any]]:
    found = []
    for api_key in sorted(api_key_map):
        for version in range(32):
            for load in loaders:
                try:
                    found.append(load(api_key, version))
                except (UnknownAPIKey, UnknownEntity):
                    continue
    return found


#: Every request and response class of every API kio knows, in (api key, version) order.
ALL_SCHEMAS = _schemas(load_request_schema, load_response_schema)


def request_schemas() -> list[type[Any]]:
    """Every request class kio knows, in (api key, version) order."""
    return _schemas(load_request_schema)


def sample_entity(cls: type[Any], width: int) -> Any:
    """An instance of ``cls`` with every field set and every array of ``width`` elements."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, EntityField):
            value: Any = sample_entity(kind.type_, width)
        elif isinstance(kind, EntityTupleField):
            value = tuple(sample_entity(kind.type_, width) for _ in range(width))
        else:
            one = _VALUES.get(get_schema_field_type(field), 3)
            value = (one,) * width if kind.is_array else one
        values[field.name] = value
    return cls(**values)


def encode_body(entity: Any) -> bytes:
    """The entity as kio writes it."""
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()
