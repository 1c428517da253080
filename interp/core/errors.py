"""Error types. Every user-facing failure is one line naming the file, row or field.

The CLI maps any `InterpError` to exit code 2 and prints only its message.
"""

from __future__ import annotations


class InterpError(Exception):
    """Base class: a clear one-line problem with the user's input or environment."""

    exit_code = 2  # what the CLI exits with

    def __str__(self) -> str:  # keep messages to one line whatever the caller passed
        return " ".join(str(a) for a in self.args).replace("\n", " ")


class CheckpointError(InterpError):
    """A checkpoint directory cannot be loaded (missing files, pickle, remote code...)."""


class BankError(InterpError):
    """A bank or template file is malformed (names the file, row and field)."""


class CacheError(InterpError):
    """A cache unit is unreadable, incomplete or cannot be written."""


class ProvenanceError(CacheError):
    """A cache unit was written for something other than what the caller asked for."""


class ConfigError(InterpError):
    """An option or config value is invalid."""


class LockError(InterpError):
    """Another sweep holds the output directory."""


class UnitsFailedError(InterpError):
    """Some units failed after their retries (listed in OUT/failures.csv); the rest finished."""

    exit_code = 3
