"""`barnabas produce --format`: read records out of stdin by a template, as rpk's produce does.

A template is literal text and tokens: ``%k`` the key, ``%v`` the value, ``%h`` headers written
``k=v,k=v`` (as ``consume --format`` prints them), ``%p`` the partition, ``%%`` a percent sign;
``\\n`` and ``\\t`` are newline and tab. Each token runs up to the literal text after it, so
two tokens need text between them; the literal text after the last token (``\\n`` by default)
ends a record, and a last record without it is still read. Input is bytes throughout: keys and
values are sent exactly as they appear.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from .errors import CliError

TOKENS = {"k": "key", "v": "value", "h": "headers (k=v,...)", "p": "partition"}
CHUNK = 64 * 1024


@dataclass
class ParsedRecord:
    """One record read from the input."""

    value: bytes = b""
    key: bytes | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int | None = None


def split_template(text: str, known: Mapping[str, str]) -> list[bytes | str]:
    """A --format template as literal bytes and one-letter tokens, alternating, first and last a literal.

    ``%%`` is a percent sign, ``\\n`` and ``\\t`` a newline and a tab (``consume --format`` uses this too).

    Raises:
        CliError: a token not in ``known``.
    """
    text = text.replace("\\n", "\n").replace("\\t", "\t")
    pieces: list[bytes | str] = []
    literal = bytearray()
    position = 0
    while position < len(text):
        if text[position] != "%":
            literal += text[position].encode()
            position += 1
            continue
        token = text[position + 1 : position + 2]
        position += 2
        if token == "%":
            literal += b"%"
        elif token in known:
            pieces += [bytes(literal), token]
            literal = bytearray()
        else:
            raise CliError(f"--format: unknown token %{token} (known: {', '.join('%' + t for t in known)}, %%)")
    return [*pieces, bytes(literal)]


def parse_template(text: str) -> list[bytes | str]:
    """produce's template, checked: each token once, text between tokens, a %v.

    Raises:
        CliError: an unknown token, a token repeated, two tokens with nothing between them, or no %v.
    """
    pieces = split_template(text, TOKENS)
    tokens = [piece for piece in pieces if isinstance(piece, str)]
    if repeated := [token for token in TOKENS if tokens.count(token) > 1]:
        raise CliError(f"--format: %{repeated[0]} appears twice")
    for before, between, after in zip(pieces, pieces[1:], pieces[2:], strict=False):
        if isinstance(before, str) and between == b"" and isinstance(after, str):
            raise CliError(f"--format: %{before} and %{after} need text between them to tell them apart")
    if "v" not in tokens:
        raise CliError("--format: no %v (the value)")
    return pieces


class _Input:
    """Buffered reads from a binary stream: up to a delimiter, or an exact literal."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = self._stream.read1(CHUNK) if hasattr(self._stream, "read1") else self._stream.read(CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def exhausted(self) -> bool:
        while not self._buffer:
            if not self._fill():
                return True
        return False

    def until(self, delimiter: bytes) -> tuple[bytes, bool]:
        """Everything before ``delimiter`` (left unread), or everything left at the end: (data, delimiter found)."""
        start = 0
        while True:
            at = self._buffer.find(delimiter, start) if delimiter else -1
            if at >= 0:
                data = bytes(self._buffer[:at])
                del self._buffer[:at]
                return data, True
            start = max(0, len(self._buffer) - len(delimiter) + 1)
            if not self._fill():
                data = bytes(self._buffer)
                self._buffer.clear()
                return data, False

    def expect(self, literal: bytes) -> bool:
        """Consume ``literal`` if the input continues with it."""
        while len(self._buffer) < len(literal) and self._fill():
            pass
        if self._buffer[: len(literal)] != literal:
            return False
        del self._buffer[: len(literal)]
        return True


def read_records(stream: BinaryIO, pieces: list[bytes | str]) -> Iterator[ParsedRecord]:
    """The records in ``stream`` by the template ``pieces`` (from parse_template).

    Raises:
        CliError: the input does not follow the template (named by record number and what was expected).
    """
    source = _Input(stream)
    number = 0
    while not source.exhausted():
        number += 1
        record = ParsedRecord()
        for index, piece in enumerate(pieces):
            if isinstance(piece, bytes):
                last = index == len(pieces) - 1
                if not source.expect(piece) and not (last and source.exhausted()):
                    raise CliError(f"--format: record {number} does not continue with {piece.decode()!r} as expected")
                continue
            delimiter = pieces[index + 1]
            assert isinstance(delimiter, bytes)
            data, found = source.until(delimiter)
            if not found and index + 1 != len(pieces) - 1:
                raise CliError(f"--format: record {number} ends before its %{piece}")
            _set(record, piece, data, number)
        yield record


def _set(record: ParsedRecord, token: str, data: bytes, number: int) -> None:
    if token == "v":
        record.value = data
    elif token == "k":
        record.key = data
    elif token == "p":
        try:
            record.partition = int(data)
        except ValueError:
            raise CliError(
                f"--format: record {number} has partition {data[:20].decode(errors='replace')!r}, not a number"
            ) from None
        if record.partition < 0:
            raise CliError(f"--format: record {number} has negative partition {record.partition}")
    else:
        for item in filter(None, data.split(b",")):
            name, sep, value = item.partition(b"=")
            if not sep or not name:
                raise CliError(
                    f"--format: record {number} has header {item[:40].decode(errors='replace')!r}, not KEY=VALUE"
                )
            record.headers.append((name.decode(errors="replace"), value))
