"""Bridges to other tools: models already in memory (`interp.wrap`) and lm-evaluation-harness."""
