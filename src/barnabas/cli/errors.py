"""The one exception a subcommand raises to exit non-zero with a one-line reason."""

from __future__ import annotations


class CliError(Exception):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
