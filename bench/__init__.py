"""Benchmarks: scripts that time and check the toolkit on real models, never timed unit tests.

`python -m bench --list` names them (bench/catalog.py), `python -m bench NAME` runs one, and
`python -m bench report` writes BENCHMARKS.md from the results files they leave in bench/results/.
"""
