"""Option values several subcommands parse alike."""

from __future__ import annotations

from .errors import CliError

__all__ = ["key_values"]


def key_values(items: list[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` items of a repeatable ``flag`` as a dict (later ones win).

    Raises:
        CliError: an item without ``=``.
    """
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out
