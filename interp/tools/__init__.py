"""Commands that load models or tokenizers themselves (`interp fertility`, `interp weat`) and their helpers."""
