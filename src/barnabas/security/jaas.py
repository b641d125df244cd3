"""Kafka's ``sasl.jaas.config`` syntax: login modules, control flags and options, parsed as Kafka parses them.

Rules this module keeps (Kafka's JaasConfig, which reads the value with Java's StreamTokenizer):

- A value is one or more entries ``<LoginModuleClass> <flag> [key=value]... ;``. The flag is one of
  required, requisite, sufficient or optional, in any case. A SASL server's entry has exactly one
  login module (Kafka's JaasContext refuses more).
- Whitespace separates tokens; ``//`` and ``/* */`` are comments.
- A word starts with a letter, ``_`` or ``$`` (or any character above U+00FF, as Java's tokenizer
  counts them) and goes on with those, digits, ``.`` and ``-``. A token starting with a digit, ``.``
  or ``-`` is a number to the tokenizer, so ``option1=3`` is refused: numbers must be quoted.
- A quoted string uses ``"`` or ``'`` and Java's escapes (``\\n``, ``\\t``, ``\\"``, ``\\\\``, octal);
  an unterminated one is refused (Java ends it silently at the line's end).
- Option keys and values are words or quoted strings; a later key replaces an earlier one.

Every error is a ConfigError whose message never repeats the value (it holds passwords).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from barnabas.config import ConfigError

__all__ = ["ControlFlag", "LoginModule", "parse_jaas_config"]


class ControlFlag(enum.Enum):
    REQUIRED = "required"
    REQUISITE = "requisite"
    SUFFICIENT = "sufficient"
    OPTIONAL = "optional"


@dataclass(frozen=True, slots=True)
class LoginModule:
    """One entry: the login module's class name, its control flag and options."""

    name: str
    flag: ControlFlag
    options: dict[str, str] = field(default_factory=dict)


class _Kind(enum.Enum):
    WORD = enum.auto()
    QUOTED = enum.auto()
    NUMBER = enum.auto()
    CHAR = enum.auto()


@dataclass(frozen=True, slots=True)
class _Token:
    kind: _Kind
    text: str


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _starts_word(char: str) -> bool:
    return (char.isascii() and (char.isalpha() or char in "_$")) or ord(char) >= 0xA0


def _in_word(char: str) -> bool:
    return _starts_word(char) or char.isdigit() or char in ".-"


def _tokens(text: str) -> list[_Token]:
    """Split ``text`` into tokens as Kafka's StreamTokenizer setup does (see the module rules)."""
    tokens: list[_Token] = []
    at, end = 0, len(text)
    while at < end:
        char = text[at]
        if ord(char) <= 0x20:
            at += 1
        elif text.startswith("//", at):
            newline = text.find("\n", at)
            at = end if newline < 0 else newline + 1
        elif text.startswith("/*", at):
            close = text.find("*/", at + 2)
            if close < 0:
                raise ConfigError("sasl.jaas.config: a /* comment is not closed")
            at = close + 2
        elif char in "\"'":
            value, at = _quoted(text, at)
            tokens.append(_Token(_Kind.QUOTED, value))
        elif _starts_word(char):
            start = at
            while at < end and _in_word(text[at]):
                at += 1
            tokens.append(_Token(_Kind.WORD, text[start:at]))
        elif char.isdigit() or char in ".-":
            start = at
            at += 1
            while at < end and (text[at].isdigit() or text[at] == "."):
                at += 1
            tokens.append(_Token(_Kind.NUMBER, text[start:at]))
        else:
            tokens.append(_Token(_Kind.CHAR, char))
            at += 1
    return tokens


def _quoted(text: str, at: int) -> tuple[str, int]:
    """The string quoted at ``text[at]`` with Java's escapes undone, and the index after its closing quote."""
    quote, at = text[at], at + 1
    out: list[str] = []
    while at < len(text):
        char = text[at]
        if char == quote:
            return "".join(out), at + 1
        if char == "\n":
            break
        if char == "\\" and at + 1 < len(text):
            at += 1
            escaped = text[at]
            if escaped in "01234567":
                digits = escaped
                limit = 3 if escaped <= "3" else 2
                while len(digits) < limit and at + 1 < len(text) and text[at + 1] in "01234567":
                    at += 1
                    digits += text[at]
                out.append(chr(int(digits, 8)))
            else:
                out.append(_ESCAPES.get(escaped, escaped))
        else:
            out.append(char)
        at += 1
    raise ConfigError("sasl.jaas.config: a quoted string is not closed")


def parse_jaas_config(text: str) -> tuple[LoginModule, ...]:
    """Every login module entry of a ``sasl.jaas.config`` value.

    Raises:
        ConfigError: no entry, a missing login module name, control flag, ``=``, value or ``;``, an
            unknown flag or an unquoted number (the message names the key, never a value).
    """
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    at = 0
    while at < len(tokens):
        module, at = _entry(tokens, at)
        modules.append(module)
    if not modules:
        raise ConfigError("sasl.jaas.config: no login module is specified")
    return tuple(modules)


def _entry(tokens: list[_Token], at: int) -> tuple[LoginModule, int]:
    name = tokens[at]
    if name.kind is not _Kind.WORD:
        raise ConfigError("sasl.jaas.config: an entry must start with a login module class name")
    at += 1
    flag_token = tokens[at] if at < len(tokens) else None
    if flag_token is None or flag_token.kind is not _Kind.WORD:
        raise ConfigError(f"sasl.jaas.config: {name.text} has no control flag (required, requisite, ...)")
    try:
        flag = ControlFlag(flag_token.text.lower())
    except ValueError:
        raise ConfigError(
            f"sasl.jaas.config: {flag_token.text!r} is not a control flag (required, requisite, sufficient, optional)"
        ) from None
    at += 1
    options: dict[str, str] = {}
    while True:
        if at >= len(tokens):
            raise ConfigError(f"sasl.jaas.config: the entry of {name.text} does not end with ';'")
        key = tokens[at]
        if key.kind is _Kind.CHAR and key.text == ";":
            return LoginModule(name.text, flag, options), at + 1
        if key.kind not in (_Kind.WORD, _Kind.QUOTED):
            raise ConfigError(f"sasl.jaas.config: an option name is expected in the entry of {name.text}")
        equals = tokens[at + 1] if at + 1 < len(tokens) else None
        value = tokens[at + 2] if at + 2 < len(tokens) else None
        if (
            equals is None
            or equals.kind is not _Kind.CHAR
            or equals.text != "="
            or value is None
            or value.kind not in (_Kind.WORD, _Kind.QUOTED)
        ):
            raise ConfigError(f"sasl.jaas.config: value not specified for key {key.text!r} (quote numbers)")
        options[key.text] = value.text
        at += 3
