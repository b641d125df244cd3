"""Typed, versionless views of kio request entities: what a handler reads, whatever the version.

kio decodes every version into classes of its own (``kio.schema.fetch.v4.request.FetchRequest``
lacks the ``current_leader_epoch`` that v9 has), so each handler declares one view of its request
instead and reads only that: ``body = view_of(FetchRequest, request.body)``. Responses are still
built with kio classes (``_build.make``).

Rules this module keeps:

- A view is a frozen, slotted, keyword-only dataclass, one per request and per nested entity. Its
  fields are the union of the fields of every version its handler accepts, under kio's names. A
  field every version has takes no default; a field some versions lack defaults to what Kafka
  uses when it is absent (the field's ``default`` in the message's JSON spec, which kio carries
  too).
- Views hold plain Python values. kio's nominal ints and strings (``i32``, ``TopicName``) already
  are ``int`` and ``str`` at run time; a kio duration (``i32Timedelta``) is read as whole
  milliseconds by the view field with Kafka's ``Ms`` suffix: kio's ``session_timeout`` is a
  view's ``session_timeout_ms: int``, as SessionTimeoutMs is in JoinGroupRequest.json.
- A tuple of entities becomes a tuple of the nested view its annotation names, and one entity the
  nested view; null stays None.
- A view accounts for every field of every kio class it is built from, with a type that accepts
  kio's: a kio field the view lacks, a type that does not fit, or a view field without a default
  that the kio class lacks is a TypeError when the converter is made. Converters are made once per
  (view, kio class) pair, on first use, and cached; tests make them for every accepted version.
- Converting is on the request path (a follower's Fetch names every partition it follows), so a
  converter sets the view's slots itself rather than calling the frozen dataclass's ``__init__``,
  which goes through ``object.__setattr__`` once per field at twice the cost. Views therefore
  have no ``__post_init__``: they only carry what the client sent.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, cast

__all__ = ["converter", "view_of"]

_V = TypeVar("_V")
Converter = Callable[[Any], Any]
_Setter = Callable[[Any, Any], None]

_ONE_MS = datetime.timedelta(milliseconds=1)
_MS = "_ms"

_CONVERTERS: dict[tuple[type, type], Converter] = {}


def view_of(view: type[_V], entity: object) -> _V:
    """Read a kio entity of any version as ``view``.

    Raises:
        TypeError: ``view`` does not fit the entity's class (see the module's rules).
    """
    return cast(_V, converter(view, type(entity))(entity))


def converter(view: type, source: type) -> Converter:
    """The cached function that turns an instance of the kio class ``source`` into a ``view``.

    Raises:
        TypeError: ``view`` does not fit ``source`` (see the module's rules).
    """
    key = (view, source)
    convert = _CONVERTERS.get(key)
    if convert is None:
        convert = _CONVERTERS[key] = _make_converter(view, source)
    return convert


def _make_converter(view: type, source: type) -> Converter:
    if not dataclasses.is_dataclass(view) or not dataclasses.is_dataclass(source):
        raise TypeError(f"{_name(view)} and {_name(source)} must both be dataclasses")
    if "__slots__" not in vars(view):
        raise TypeError(f"{_name(view)} must be slotted: its converter sets the slots")
    if hasattr(view, "__post_init__"):
        raise TypeError(f"{_name(view)} has a __post_init__, which its converter would skip")
    view_hints = typing.get_type_hints(view)
    source_hints = typing.get_type_hints(source)
    unread = {field.name for field in dataclasses.fields(source)}
    reads: list[tuple[_Setter, Converter]] = []
    defaults: list[tuple[_Setter, object]] = []
    for field in dataclasses.fields(view):
        name = field.name
        set_slot = getattr(view, name).__set__  # the slot's member descriptor
        millis = name[: -len(_MS)] if name.endswith(_MS) else None
        if name in unread:
            reads.append((set_slot, _reader(view, name, view_hints[name], source, source_hints[name])))
            unread.remove(name)
        elif millis is not None and millis in unread and _is_duration(source_hints[millis]):
            if view_hints[name] is not int:
                raise TypeError(f"{_name(view)}.{name}: milliseconds are an int, not {view_hints[name]}")
            reads.append((set_slot, _milliseconds(attrgetter(millis))))
            unread.remove(millis)
        elif field.default is not dataclasses.MISSING:
            defaults.append((set_slot, field.default))
        else:
            raise TypeError(f"{_name(view)}.{name} has no default, and {_name(source)} has no such field")
    if unread:
        raise TypeError(f"{_name(view)} lacks {_name(source)}'s fields {sorted(unread)}")
    return _assemble(view, tuple(reads), tuple(defaults))


def _assemble(
    view: type, reads: tuple[tuple[_Setter, Converter], ...], defaults: tuple[tuple[_Setter, object], ...]
) -> Converter:
    new = object.__new__

    def convert(entity: Any) -> Any:
        value: object = new(view)
        for set_slot, read in reads:
            set_slot(value, read(entity))
        for set_slot, default in defaults:
            set_slot(value, default)
        return value

    return convert


def _reader(view: type, name: str, wanted: Any, source: type, given: Any) -> Converter:
    """How to read kio's field ``name`` (typed ``given``) into the view's (typed ``wanted``)."""
    where = f"{_name(view)}.{name}"
    if _is_duration(given):
        raise TypeError(f"{where}: kio's duration is read as whole milliseconds, by a field named {name}{_MS}")
    item = _tuple_item(wanted)
    if isinstance(item, type) and dataclasses.is_dataclass(item):
        given_item = _tuple_item(given)
        if not isinstance(given_item, type) or (_nullable(given) and not _nullable(wanted)):
            raise TypeError(f"{where}: {wanted} does not fit {_name(source)}'s {given}")
        return _nested(attrgetter(name), converter(item, given_item), nullable=_nullable(given))
    single = _entity(wanted)
    if single is not None:
        given_single = _entity(given)
        if given_single is None or (_nullable(given) and not _nullable(wanted)):
            raise TypeError(f"{where}: {wanted} does not fit {_name(source)}'s {given}")
        return _one(attrgetter(name), converter(single, given_single))
    if not _fits(wanted, given):
        raise TypeError(f"{where}: {wanted} does not fit {_name(source)}'s {given}")
    return attrgetter(name)


def _nested(read: Converter, convert: Converter, *, nullable: bool) -> Converter:
    if nullable:
        return lambda entity: None if (items := read(entity)) is None else tuple(map(convert, items))
    return lambda entity: tuple(map(convert, read(entity)))


def _one(read: Converter, convert: Converter) -> Converter:
    return lambda entity: None if (item := read(entity)) is None else convert(item)


def _entity(hint: Any) -> type | None:
    """X of ``X`` or ``X | None`` when X is a dataclass (one nested entity); None for any other hint."""
    members = [m for m in _members(hint) if m is not type(None)]
    if len(members) == 1 and isinstance(members[0], type) and dataclasses.is_dataclass(members[0]):
        return members[0]
    return None


def _milliseconds(read: Converter) -> Converter:
    return lambda entity: read(entity) // _ONE_MS


def _members(hint: Any) -> tuple[Any, ...]:
    return typing.get_args(hint) if typing.get_origin(hint) in (types.UnionType, typing.Union) else (hint,)


def _nullable(hint: Any) -> bool:
    return type(None) in _members(hint)


def _tuple_item(hint: Any) -> Any:
    """X of ``tuple[X, ...]`` or ``tuple[X, ...] | None``; None for any other hint."""
    for member in _members(hint):
        args = typing.get_args(member)
        if typing.get_origin(member) is tuple and len(args) == 2 and args[1] is Ellipsis:
            return args[0]
    return None


def _is_duration(hint: Any) -> bool:
    return any(isinstance(member, type) and issubclass(member, datetime.timedelta) for member in _members(hint))


def _fits(wanted: Any, given: Any) -> bool:
    """Whether every value of kio's type ``given`` is a value of the view's type ``wanted``."""
    return all(any(_member_fits(w, g) for w in _members(wanted)) for g in _members(given))


def _member_fits(wanted: Any, given: Any) -> bool:
    if typing.get_origin(wanted) is tuple and typing.get_origin(given) is tuple:
        wanted_item, given_item = _tuple_item(wanted), _tuple_item(given)
        return wanted_item is not None and given_item is not None and _fits(wanted_item, given_item)
    return isinstance(wanted, type) and isinstance(given, type) and issubclass(given, wanted)


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
