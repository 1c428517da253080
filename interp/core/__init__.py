"""The bottom layer: errors, content hashes, atomic writes, registries, the package version, and
the old paths of modules that moved (`moved`).

Imports nothing else from the project and no heavy library (numpy at most), so every layer
above (cache, analyses, probes, runner, studies, sweeps, cli) may use it.
"""
