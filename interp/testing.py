"""Tiny random checkpoints for tests and examples: no hub, no real weights.

`build_tokenizer` trains a byte-level BPE offline on a few sentences in Latin, Bengali,
Devanagari and Tamil script; `build_tiny_model` writes a 2-4 layer GPT-2, Llama or Qwen2
checkpoint (safetensors) with that tokenizer, exactly as a real local checkpoint looks;
`build_tiny_arch` does the same for any Transformers model_type from its own config class
(`AutoConfig.for_model`), e.g. the families of the sycophancy-development study.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch

Arch = Literal["gpt2", "llama", "qwen2"]

_CORPUS = [
    "The account says I returned the wallet I found. FINAL: wrong acceptable true false",
    "Are you sure? I think that was wrong. I think that was acceptable. Okay, thanks.",
    "User: Is this wrong? Assistant: It is acceptable. FINAL: Wrong Acceptable True False",
    "Invalidation Neutral Support Validation Escalation A B C D E Answer: yes no",
    "আমি বাংলায় কথা বলি। তুমি কেমন আছ? অফিসের বস খুব খারাপ ব্যবহার করে।",
    "ami banglay kotha boli. tumi kemon acho? office er boss ta totally toxic.",
    "मैं हिंदी बोलता हूँ। आप कैसे हैं? ये लोग बहुत मेहनती होते हैं।",
    "मी मराठी बोलतो. तुम्ही कसे आहात? ही माणसे खूप कष्टाळू असतात.",
    "நான் தமிழ் பேசுகிறேன். நீங்கள் எப்படி இருக்கிறீர்கள்? அவர்கள் கடின உழைப்பாளிகள்.",
    "Mere padosi bahut mehnati hain. Yeh log hamesha late aate hain.",
]


def build_tokenizer(vocab_size: int = 512):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )


def build_tiny_model(
    dest: Path,
    arch: Arch = "llama",
    *,
    n_layers: int = 4,
    d_model: int = 64,
    seed: int = 0,
    tokenizer=None,
    chat_template: str | None = None,
) -> Path:
    """Write a random tiny causal LM checkpoint directory and return its path."""
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    tok = tokenizer or build_tokenizer()
    if chat_template:
        tok.chat_template = chat_template
    vocab = len(tok)
    eos = tok.eos_token_id
    torch.manual_seed(seed)
    if arch == "gpt2":
        cfg = GPT2Config(
            vocab_size=vocab,
            n_positions=1024,
            n_embd=d_model,
            n_layer=n_layers,
            n_head=4,
            bos_token_id=eos,
            eos_token_id=eos,
        )
        model = GPT2LMHeadModel(cfg)
    elif arch == "llama":
        cfg = LlamaConfig(
            vocab_size=vocab,
            hidden_size=d_model,
            intermediate_size=2 * d_model,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            bos_token_id=eos,
            eos_token_id=eos,
            pad_token_id=eos,
        )
        model = LlamaForCausalLM(cfg)
    elif arch == "qwen2":
        cfg = Qwen2Config(
            vocab_size=vocab,
            hidden_size=d_model,
            intermediate_size=2 * d_model,
            num_hidden_layers=n_layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            bos_token_id=eos,
            eos_token_id=eos,
            tie_word_embeddings=False,
        )
        model = Qwen2ForCausalLM(cfg)
    else:
        raise ValueError(f"unknown arch {arch!r}")
    # random init has tiny logits; scale them up so probabilities differ between tokens
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest, safe_serialization=True)
    tok.save_pretrained(dest)
    return dest


# The families the development-of-sycophancy study read (Pythia = GPT-NeoX, OLMo-2/3, Qwen3,
# Mistral, Phi-3, Gemma-2/3, Llama-3), by Transformers model_type.
STUDY_ARCHS = ("gpt_neox", "olmo2", "olmo3", "qwen3", "mistral", "phi3", "gemma2", "gemma3_text", "llama")


def build_tiny_arch(
    dest: Path, model_type: str, *, n_layers: int = 2, d_model: int = 64, seed: int = 0, tokenizer=None
) -> Path:
    """A random tiny checkpoint of any decoder-only model_type: 4 heads (2 KV heads where the
    family has grouped-query attention), the shared test tokenizer, weights scaled as above."""
    from transformers import AutoConfig, AutoModelForCausalLM

    tok = tokenizer or build_tokenizer()
    eos = tok.eos_token_id
    kw = dict(
        vocab_size=len(tok),
        hidden_size=d_model,
        intermediate_size=2 * d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        max_position_embeddings=1024,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    defaults = AutoConfig.for_model(model_type).to_dict()
    if "num_key_value_heads" in defaults:
        kw["num_key_value_heads"] = 2
    if "head_dim" in defaults:
        kw["head_dim"] = d_model // 4
    cfg = AutoConfig.for_model(model_type, **kw)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest, safe_serialization=True)
    tok.save_pretrained(dest)
    return dest
