"""Who a connection is: Kafka's principal, and the mapping of a certificate's name to it.

Rules this module keeps (Kafka's DefaultKafkaPrincipalBuilder and SslPrincipalMapper):

- A connection on a PLAINTEXT listener, or on an SSL listener without a client certificate, is
  ``User:ANONYMOUS``. With a verified client certificate it is ``User:<name>``, where the name is
  the certificate subject's distinguished name (RFC 2253: last RDN first, ``CN=…,OU=…,O=…,C=…``)
  mapped by ``ssl.principal.mapping.rules``.
- The rules are Kafka's: a comma-separated list of ``RULE:pattern/replacement/`` (optionally
  ``/L`` or ``/U`` to lower- or upper-case the result) and ``DEFAULT`` (the name unchanged). The
  first rule whose pattern matches the whole name gives the principal; a name no rule matches
  fails the connection's authentication.
- Patterns are Python regular expressions (Java's agree for the usual ``^CN=(.*?),OU=….*$``);
  replacements use Java's ``$1`` group references and ``\\`` escapes, and a reference to a group
  the pattern does not have is literal text, as Kafka makes it. Every rule is checked when the
  broker starts: a bad one is a one-line ConfigError.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from barnabas.config import ConfigError

__all__ = ["ANONYMOUS", "KafkaPrincipal", "NoMatchingRuleError", "SslPrincipalMapper", "distinguished_name"]


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Kafka's KafkaPrincipal: a type (``User``) and a name."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

# Kafka's RULE_PATTERN, RULE_SPLITTER and RULE_PARSER (SslPrincipalMapper), unchanged.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE)


class NoMatchingRuleError(ValueError):
    """No ``ssl.principal.mapping.rules`` rule applies to a distinguished name."""


#: A compiled replacement: literal text, or the number of a group whose text goes there.
_Part = str | int


@dataclass(frozen=True, slots=True)
class _Rule:
    """One rule: DEFAULT (``pattern`` None), or a pattern, its replacement and a case change."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    parts: tuple[_Part, ...] = ()
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        parts = self.parts
        result = self.pattern.sub(lambda m: "".join(p if isinstance(p, str) else m.group(p) or "" for p in parts), name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed once: :meth:`name` maps a distinguished name.

    Raises (at construction):
        ConfigError: a rule does not parse, its pattern does not compile, or its replacement is bad.
    """

    def __init__(self, rules: str | None) -> None:
        self.rules: tuple[_Rule, ...] = tuple(
            rule for text in _split(rules if rules is not None else "DEFAULT") if (rule := _parse(text))
        )

    def name(self, distinguished: str) -> str:
        """The principal name for ``distinguished`` (the first rule that applies).

        Raises:
            NoMatchingRuleError: no rule applies.
        """
        for rule in self.rules:
            mapped = rule.apply(distinguished)
            if mapped is not None:
                return mapped
        raise NoMatchingRuleError(f"no rule applies to {distinguished!r}, rules {self._listed()}")

    def _listed(self) -> str:
        return "[" + ", ".join(map(str, self.rules)) + "]"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._listed()})"


def _split(rules: str) -> list[str]:
    return [match.group(1) for match in _SPLITTER.finditer(rules.strip())]


def _parse(text: str) -> _Rule | None:
    """One rule; None for an empty one (Kafka ignores those)."""
    key = "ssl.principal.mapping.rules"
    match = _PARSER.match(text)
    if match is None or match.end() != len(text):
        rest = text[match.end() :] if match else text
        raise ConfigError(f"{key}: invalid rule {text!r}, unmatched text {rest!r}")
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is None:
        return None
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise ConfigError(f"{key}: rule {text!r}: pattern does not compile: {exc}") from None
    replacement = match.group(4)
    return _Rule(pattern, replacement, _replacement_parts(replacement, pattern.groups, text), match.group(6))


def _replacement_parts(replacement: str, groups: int, rule: str) -> tuple[_Part, ...]:
    """Java's replacement syntax (Matcher.appendReplacement) as literal text and group numbers.

    ``\\x`` is ``x``; ``$n`` is group n, taking more digits while the number stays a group of the
    pattern (``$12`` is group 12 if there is one, else group 1 and ``2``). A reference past the
    pattern's groups is literal text, as Kafka's escapeLiteralBackReferences makes it, unless the
    pattern has no groups at all (Kafka then fails every mapping; here the rule is refused).

    Raises:
        ConfigError: a dangling ``\\`` or ``$``, a named reference, or a group the pattern lacks.
    """
    key = "ssl.principal.mapping.rules"
    parts: list[_Part] = []
    literal: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            if i + 1 == len(replacement):
                raise ConfigError(f"{key}: rule {rule!r}: the replacement ends with a lone backslash")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if char != "$":
            literal.append(char)
            i += 1
            continue
        number, i = _group_reference(replacement, i + 1, groups, rule)
        if number is None:
            literal.append("$")  # past the pattern's groups: the digits follow as text
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(number)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def _group_reference(replacement: str, start: int, groups: int, rule: str) -> tuple[int | None, int]:
    """The group a ``$`` at ``start - 1`` refers to and where the text goes on; None for a literal ``$``."""
    key = "ssl.principal.mapping.rules"
    if start == len(replacement) or not replacement[start].isdigit():
        named = replacement[start : start + 1] == "{"
        reason = "named group references are not supported" if named else "a '$' not followed by a group number"
        raise ConfigError(f"{key}: rule {rule!r}: {reason}")
    number = int(replacement[start])
    if number > groups:
        if groups == 0:
            raise ConfigError(f"{key}: rule {rule!r}: the replacement refers to group {number}, the pattern has none")
        return None, start
    end = start + 1
    while end < len(replacement) and replacement[end].isdigit() and number * 10 + int(replacement[end]) <= groups:
        number = number * 10 + int(replacement[end])
        end += 1
    return number, end


#: RFC 2253 keywords for the attribute names Python's ``getpeercert()`` uses (OpenSSL's long names).
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def distinguished_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """A certificate subject (``getpeercert()["subject"]``) as RFC 2253 text, as Java's X500Principal.getName gives it.

    The last RDN comes first; the attributes of a multi-valued RDN are joined with ``+``; values
    are escaped per RFC 2253 section 2.4. Attributes without an RFC 2253 keyword keep OpenSSL's
    name (Java would write their OID and the value's DER in hex).
    """
    rdns = ("+".join(f"{_KEYWORDS.get(name, name)}={_escape(value)}" for name, value in rdn) for rdn in subject)
    return ",".join(reversed(list(rdns)))


def _escape(value: str) -> str:
    escaped = "".join("\\" + char if char in ',+"\\<>;' else char for char in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped
