"""The model side below the scoring engine: checkpoint directories and their fingerprints, loading,
hook sites found in the module tree, device and precision names."""
