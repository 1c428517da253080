"""Deprecated alias of interp.core.errors (kept so existing imports keep working)."""

from interp.core.errors import *  # noqa: F401,F403
from interp.core.errors import (  # noqa: F401
    BankError,
    CacheError,
    CheckpointError,
    ConfigError,
    InterpError,
    LockError,
    ProvenanceError,
    UnitsFailedError,
)
