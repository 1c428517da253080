"""Applications that load models or run sweeps themselves: the demo, `interp selftest`,
`interp fetch-models` (fetch), `interp fertility`, `interp weat` and their embedders."""
