"""The attention knob and packed rows as the probes and the bundled trainer run them: transformers'
attn_implementation for --attention (flash-attention on a GPU; on the CPU and in the sim a stand-in that saves the
same tensors), and a padding-free row of samples (TRL's padding_free collator)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

FLASH_STANDIN = "memplan_varlen"  # the sim's and CPU's stand-in for flash-attention (same saved tensors)


def attn_implementation(knobs, device_type: str) -> str | None:
    """transformers' attn_implementation for the knob (None: the family's default)."""
    if knobs.attention == "flash":
        return "flash_attention_2" if device_type == "cuda" else _register_flash_standin()
    return "eager" if knobs.attention == "eager" else None


def _register_flash_standin() -> str:
    """SDPA on the whole row, causal, no mask, k/v unrepeated: it saves q, k, v, out and the log-sum-exp as
    flash-attention does (memory only: across a packed row's samples it attends where flash would not)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    def attend(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
        out = F.scaled_dot_product_attention(
            query,
            key,
            value,
            is_causal=True,
            scale=scaling,
            dropout_p=dropout,
            enable_gqa=key.shape[1] != query.shape[1],
        )
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(FLASH_STANDIN, attend)
    AttentionMaskInterface.register(FLASH_STANDIN, lambda *a, **kw: None)
    return FLASH_STANDIN


# -- packing -------------------------------------------------------------------------------------------
def pack(ids: list[list[int]]) -> dict:
    """A padding-free row of samples (TRL's padding_free collator): one row, positions restarting at each
    sample, and no sample's first token a target of the one before it."""
    flat = [t for s in ids for t in s]
    positions = [p for s in ids for p in range(len(s))]
    labels = list(flat)
    start = 0
    for s in ids:
        if start:
            labels[start] = -100
        start += len(s)
    return {
        "input_ids": torch.tensor([flat]),
        "position_ids": torch.tensor([positions]),
        "labels": torch.tensor([labels]),
    }
