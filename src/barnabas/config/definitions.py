"""Typed configuration definitions with Kafka's names, types and parsing rules.

Rules this module keeps:

- A value is parsed from its string form exactly once, by its definition, and validated;
  failure raises ConfigError with a one-line reason naming the key.
- ``config_type`` numbers are DescribeConfigs' (KIP-226/KIP-569): 1 boolean, 2 string,
  3 int, 5 long, 6 double, 7 list, 9 password.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigDef",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "at_least",
    "between",
    "between_or",
    "one_of",
    "parse_host_port",
    "parse_properties",
    "read_properties_file",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """An unknown key or an invalid value; the message is one line for the user."""


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv6 host in brackets) as (host, port).

    Raises:
        ValueError: not that shape, or the port is not a number in 1..65535.
    """
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


class ConfigType(enum.IntEnum):
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Where a value came from, numbered as DescribeConfigs reports it."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


Validator = Callable[[Any], str | None]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One setting: name, type, default (already parsed), validation and documentation.

    An ``internal`` setting (Kafka's defineInternal, meant for tests) is described only when set.
    """

    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    internal: bool = False

    def parse(self, raw: str) -> Any:
        """Parse and validate the string form of a value.

        Raises:
            ConfigError: the value does not parse or is out of range.
        """
        text = raw.strip()
        try:
            value = _PARSERS[self.type](text)
        except ValueError:
            raise ConfigError(f"{self.name}: {raw!r} is not a valid {self.type.name.lower()}") from None
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        """Validate an already-typed value.

        Raises:
            ConfigError: out of range.
        """
        if self.type is ConfigType.INT and value is not None and not -(2**31) <= value <= INT32_MAX:
            raise ConfigError(f"{self.name}: {value} is outside the int range")
        if self.type is ConfigType.LONG and value is not None and not -(2**63) <= value <= INT64_MAX:
            raise ConfigError(f"{self.name}: {value} is outside the long range")
        if self.validator is not None and value is not None and (problem := self.validator(value)):
            raise ConfigError(f"{self.name}: {problem}")

    def render(self, value: Any) -> str | None:
        """The string form Kafka would show for ``value`` (DescribeConfigs)."""
        if value is None:
            return None
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.LIST:
            return ",".join(value)
        return str(value)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError(text)
    return lowered == "true"


def _parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


_PARSERS: dict[ConfigType, Callable[[str], Any]] = {
    ConfigType.BOOLEAN: _parse_bool,
    ConfigType.STRING: str,
    ConfigType.PASSWORD: str,
    ConfigType.INT: int,
    ConfigType.LONG: int,
    ConfigType.DOUBLE: float,
    ConfigType.LIST: _parse_list,
}


def at_least(minimum: int | float) -> Validator:
    return lambda value: None if value >= minimum else f"value {value} must be at least {minimum}"


def between(low: int | float, high: int | float) -> Validator:
    return lambda value: None if low <= value <= high else f"value {value} must be between {low} and {high}"


def between_or(low: int, high: int, other: int) -> Validator:
    """``low`` to ``high``, or ``other`` (Kafka's GZIP level validator: 1 to 9, or -1 for the default)."""

    def check(value: Any) -> str | None:
        if value == other or low <= value <= high:
            return None
        return f"value {value} must be between {low} and {high} or equal to {other}"

    return check


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> str | None:
        values = value if isinstance(value, list) else [value]
        bad = [v for v in values if v not in choices]
        return f"{bad[0]!r} is not one of {', '.join(choices)}" if bad else None

    return check


def read_properties_file(file: Path) -> dict[str, tuple[str, str]]:
    """A properties file's settings, each with where it came from (the file's name).

    Raises:
        ConfigError: the file cannot be read or a line does not parse.
    """
    try:
        text = file.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    return {key: (value, str(file)) for key, value in parse_properties(text, str(file)).items()}


def parse_properties(text: str, origin: str = "properties") -> dict[str, str]:
    """Parse Java .properties text: ``#``/``!`` comments, ``=``/``:``/space separators,
    backslash line continuations and the common escapes.

    Raises:
        ConfigError: a line has no key.
    """
    result: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for number, line in enumerate(logical, 1):
        key, value = _split_property(line)
        if not key:
            raise ConfigError(f"{origin}: entry {number} has no key: {line!r}")
        result[key] = value
    return result


def _split_property(line: str) -> tuple[str, str]:
    key_chars: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            key_chars.append(_unescape(line[i + 1]))
            i += 2
            continue
        if ch in "=: \t":
            break
        key_chars.append(ch)
        i += 1
    rest = line[i:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    value_chars: list[str] = []
    j = 0
    while j < len(rest):
        if rest[j] == "\\" and j + 1 < len(rest):
            value_chars.append(_unescape(rest[j + 1]))
            j += 2
            continue
        value_chars.append(rest[j])
        j += 1
    return "".join(key_chars), "".join(value_chars).rstrip()


def _unescape(ch: str) -> str:
    return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(ch, ch)
