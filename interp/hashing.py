"""Deprecated alias of interp.core.hashing (kept so existing imports keep working)."""

from interp.core.hashing import canonical_json, sha256_bytes, sha256_file, sha256_json  # noqa: F401
