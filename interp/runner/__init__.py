"""Scoring runner: one protocol, three backends, prefix-KV reuse on the reference backend."""
