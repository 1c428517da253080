"""The package version, read once from the installed package metadata (pyproject.toml)."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("interp")
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
