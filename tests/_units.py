"""A cache unit identity for tests that write units by hand (every field a placeholder but those given)."""

from cache import UnitIdentity


def ident(**kw) -> UnitIdentity:
    base = dict(
        checkpoint="ck",
        checkpoint_fingerprint="f" * 64,
        study="pressure",
        study_version="1",
        bank="moral",
        bank_hash="b" * 64,
        template_hash="t" * 64,
        settings_hash="s" * 64,
        layer=3,
    )
    base.update(kw)
    return UnitIdentity(**base)
