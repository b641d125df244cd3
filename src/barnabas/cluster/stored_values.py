"""Reading the values barnabas keeps in coordination storage: exact shapes, one documented error.

Rules this module keeps:

- Only barnabas writes these values (``to_json`` / ``to_bytes`` of the cluster types), so a value is
  read as exactly the shape barnabas writes, or wrote in an earlier version (a field it did not
  have yet takes its default). Nothing is coerced: ``"isr": "12"`` is not the brokers 1 and 2,
  ``true`` is not the broker id 1, ``"5"`` and ``5.0`` are not the epoch 5.
- Every way a value can be wrong (not UTF-8, not JSON, nested past the parser's depth, a field
  missing or of the wrong type, a malformed UUID, base64 or number) raises
  :class:`CorruptValueError`, and nothing else: callers catch that one error and do what is safe
  with a value they cannot use, which each caller documents.
"""

from __future__ import annotations

import base64
import binascii
import json
import reprlib
import uuid
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

__all__ = ["CorruptValueError", "StoredDocument", "decimal_value", "text_value"]

_T = TypeVar("_T")


class CorruptValueError(ValueError):
    """A value in coordination storage is not one barnabas wrote: unreadable, or of another shape."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what} is unreadable: {problem}")
        self.what = what


class _Missing:
    """The default of a required field."""


_REQUIRED: Final = _Missing()


def text_value(data: bytes, what: str) -> str:
    """A value stored as UTF-8 text (the cluster id).

    Raises:
        CorruptValueError: the bytes are not UTF-8, or the text is empty.
    """
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise CorruptValueError(what, f"not UTF-8 ({exc.reason})") from None
    if not text:
        raise CorruptValueError(what, "empty")
    return text


def decimal_value(data: bytes, what: str) -> int:
    """A value stored as a decimal number (a broker epoch counter).

    Raises:
        CorruptValueError: anything but ASCII digits.
    """
    if not data.isdigit() or not data.isascii():
        raise CorruptValueError(what, f"{data[:40]!r} is not a decimal number")
    return int(data)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 40


def _describe(value: object) -> str:
    """A short rendering of a JSON value for a message (reprlib: bounded, whatever the nesting)."""
    return _SHORT.repr(value)


class StoredDocument:
    """One JSON object read from storage, with typed getters that refuse any other shape.

    Args:
        data: the stored bytes.
        what: what the value is, for messages ("the state of orders-0").

    Raises:
        CorruptValueError: the bytes are not a JSON object.
    """

    def __init__(self, data: bytes | Mapping[str, object], what: str) -> None:
        self.what = what
        if isinstance(data, Mapping):
            self._fields: Mapping[str, object] = data
            return
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise CorruptValueError(what, f"not JSON ({type(exc).__name__})") from None
        if not isinstance(parsed, dict):
            raise CorruptValueError(what, f"{_describe(parsed)} is not a JSON object")
        self._fields = parsed

    def _field(self, name: str, default: object, check: Callable[[object], bool], kind: str) -> object:
        if name not in self._fields or (self._fields[name] is None and default is not _REQUIRED):
            if default is _REQUIRED:
                raise CorruptValueError(self.what, f"field {name!r} is missing")
            return default
        value = self._fields[name]
        if not check(value):
            raise CorruptValueError(self.what, f"field {name!r} is {_describe(value)}, not {kind}")
        return value

    def _fail(self, name: str, problem: str) -> CorruptValueError:
        return CorruptValueError(self.what, f"field {name!r} {problem}")

    def integer(self, name: str, default: int | _Missing = _REQUIRED) -> int:
        value = self._field(name, default, _is_int, "an integer")
        assert isinstance(value, int)
        return value

    def text(self, name: str, default: str | _Missing = _REQUIRED) -> str:
        value = self._field(name, default, lambda v: isinstance(v, str), "a string")
        assert isinstance(value, str)
        return value

    def optional_text(self, name: str) -> str | None:
        value = self._field(name, None, lambda v: isinstance(v, str), "a string")
        return value if isinstance(value, str) else None

    def flag(self, name: str, default: bool | _Missing = _REQUIRED) -> bool:
        value = self._field(name, default, lambda v: isinstance(v, bool), "true or false")
        assert isinstance(value, bool)
        return value

    def identifier(self, name: str) -> uuid.UUID:
        """A UUID in its canonical text form, as ``str(uuid)`` writes it."""
        text = self.text(name)
        try:
            parsed = uuid.UUID(text)
        except ValueError:
            raise self._fail(name, f"{text[:40]!r} is not a UUID") from None
        if str(parsed) != text:
            raise self._fail(name, f"{text[:40]!r} is not a UUID in canonical form")
        return parsed

    def optional_identifier(self, name: str) -> uuid.UUID | None:
        return self.identifier(name) if self._fields.get(name) is not None else None

    def base64_bytes(self, name: str) -> bytes:
        text = self.text(name)
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise self._fail(name, "is not base64") from None

    def integers(self, name: str, default: tuple[int, ...] | _Missing = _REQUIRED) -> tuple[int, ...]:
        return self._items(name, default, _is_int, "integers")

    def texts(self, name: str, default: tuple[str, ...] | _Missing = _REQUIRED) -> tuple[str, ...]:
        return self._items(name, default, lambda v: isinstance(v, str), "strings")

    def _items(
        self, name: str, default: tuple[_T, ...] | _Missing, check: Callable[[object], bool], kind: str
    ) -> tuple[_T, ...]:
        value = self._field(name, default, lambda v: isinstance(v, list) and all(map(check, v)), f"a list of {kind}")
        assert isinstance(value, list | tuple)
        return tuple(value)

    def documents(self, name: str) -> tuple[StoredDocument, ...]:
        """A list of JSON objects (a broker's endpoints); absent is empty."""
        items: tuple[dict[str, object], ...] = self._items(name, (), lambda v: isinstance(v, dict), "objects")
        return tuple(StoredDocument(item, f"{self.what}, {name}[{i}]") for i, item in enumerate(items))

    def text_map(self, name: str) -> dict[str, str]:
        """An object of strings (a topic's config); absent is empty."""

        def check(value: object) -> bool:
            return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())

        value = self._field(name, {}, check, "an object of strings")
        assert isinstance(value, dict)
        return dict(value)

    def by_number(
        self, name: str, kind: str, check: Callable[[object], bool], default: object = _REQUIRED
    ) -> dict[int, object]:
        """An object keyed by decimal numbers (partitions, broker ids), each value passing ``check``."""
        value = self._field(name, default, lambda v: isinstance(v, dict), "an object")
        assert isinstance(value, dict)
        out: dict[int, object] = {}
        for key, item in value.items():
            if not (key.isdigit() and key.isascii()) or str(int(key)) != key:
                raise self._fail(name, f"has the key {key[:40]!r}, not a number")
            if not check(item):
                raise self._fail(name, f"has {_describe(item)} at {key}, not {kind}")
            out[int(key)] = item
        return out

    def integer_by_number(self, name: str) -> dict[int, int]:
        """An object of integers keyed by numbers (broker epochs by broker id); absent is empty."""
        return {k: v for k, v in self.by_number(name, "an integer", _is_int, {}).items() if isinstance(v, int)}

    def integers_by_number(self, name: str, *, required: bool = False) -> dict[int, tuple[int, ...]]:
        """An object of integer lists keyed by numbers (replicas by partition); absent is empty unless required."""

        def check(item: object) -> bool:
            return isinstance(item, list) and all(map(_is_int, item))

        found = self.by_number(name, "a list of integers", check, _REQUIRED if required else {})
        return {k: tuple(v) for k, v in found.items() if isinstance(v, list)}
