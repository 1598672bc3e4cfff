"""The module tree InternVL's own modeling code builds (trust_remote_code): class names and attribute names as
OpenGVLab/InternVL at 2410d1d, internvl_chat/internvl/model/, names them (SOURCES.md); no forward, no weights.
`build(config)` returns InternVLChatModel for a config.json of tests/data/checkpoints (its llm_config picks the
language model as modeling_internvl_chat.py:75-84 does; Qwen2 and Llama are transformers' own classes there)."""

import torch
from torch import nn


class InternAttention(nn.Module):  # modeling_intern_vit.py:177-208
    def __init__(self, c: dict):
        super().__init__()
        self.qkv = nn.Linear(c["hidden_size"], 3 * c["hidden_size"], bias=c.get("qkv_bias", True))
        self.proj = nn.Linear(c["hidden_size"], c["hidden_size"])


class InternMLP(nn.Module):  # modeling_intern_vit.py:251-257
    def __init__(self, c: dict):
        super().__init__()
        self.fc1 = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.fc2 = nn.Linear(c["intermediate_size"], c["hidden_size"])


class InternVisionEncoderLayer(nn.Module):  # modeling_intern_vit.py:266-281
    def __init__(self, c: dict):
        super().__init__()
        self.attn = InternAttention(c)
        self.mlp = InternMLP(c)
        self.norm1 = nn.LayerNorm(c["hidden_size"])
        self.norm2 = nn.LayerNorm(c["hidden_size"])
        self.ls1 = nn.Parameter(torch.ones(c["hidden_size"]))
        self.ls2 = nn.Parameter(torch.ones(c["hidden_size"]))


class InternVisionEmbeddings(nn.Module):  # modeling_intern_vit.py:133-152
    def __init__(self, c: dict):
        super().__init__()
        p = c["patch_size"]
        self.class_embedding = nn.Parameter(torch.zeros(1, 1, c["hidden_size"]))
        self.patch_embedding = nn.Conv2d(3, c["hidden_size"], kernel_size=p, stride=p)


class InternVisionEncoder(nn.Module):  # modeling_intern_vit.py:298-315
    def __init__(self, c: dict):
        super().__init__()
        self.layers = nn.ModuleList(InternVisionEncoderLayer(c) for _ in range(c["num_hidden_layers"]))


class InternVisionModel(nn.Module):  # modeling_intern_vit.py:364-376
    _no_split_modules = ("InternVisionEncoderLayer",)

    def __init__(self, c: dict):
        super().__init__()
        self.embeddings = InternVisionEmbeddings(c)
        self.encoder = InternVisionEncoder(c)


class InternLM2MLP(nn.Module):  # modeling_internlm2.py:264-272
    def __init__(self, c: dict):
        super().__init__()
        self.w1 = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.w3 = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.w2 = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)


class InternLM2Attention(nn.Module):  # modeling_internlm2.py:295-321
    def __init__(self, c: dict):
        super().__init__()
        h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        d = h // heads
        self.wqkv = nn.Linear(h, (heads + 2 * kv) * d, bias=c.get("bias", False))
        self.wo = nn.Linear(heads * d, h, bias=c.get("bias", False))


class InternLM2RMSNorm(nn.Module):  # modeling_internlm2.py:129-135
    def __init__(self, h: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))


class InternLM2DecoderLayer(nn.Module):  # modeling_internlm2.py:624-633
    def __init__(self, c: dict):
        super().__init__()
        self.attention = InternLM2Attention(c)
        self.feed_forward = InternLM2MLP(c)
        self.attention_norm = InternLM2RMSNorm(c["hidden_size"])
        self.ffn_norm = InternLM2RMSNorm(c["hidden_size"])


class InternLM2Model(nn.Module):  # modeling_internlm2.py:810-832
    def __init__(self, c: dict):
        super().__init__()
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(InternLM2DecoderLayer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = InternLM2RMSNorm(c["hidden_size"])


class InternLM2ForCausalLM(nn.Module):  # modeling_internlm2.py:1002-1011 (_no_split_modules: :724)
    _no_split_modules = ("InternLM2DecoderLayer",)

    def __init__(self, c: dict):
        super().__init__()
        self.model = InternLM2Model(c)
        self.output = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)


def language_model(c: dict) -> nn.Module:
    """modeling_internvl_chat.py:75-84: InternLM2 from the repository, Llama / Qwen2 from transformers."""
    arch = c["architectures"][0]
    if arch == "InternLM2ForCausalLM":
        return InternLM2ForCausalLM(c)
    import transformers

    kind = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}[arch]
    conf = transformers.AutoConfig.for_model(kind, **{k: v for k, v in c.items() if k not in ("model_type", "bias")})
    return getattr(transformers, arch)(conf)


class InternVLChatModel(nn.Module):  # modeling_internvl_chat.py:39-94
    _no_split_modules = (  # :43-44
        "InternVisionModel",
        "LlamaDecoderLayer",
        "InternLM2DecoderLayer",
        "Phi3DecoderLayer",
        "Qwen2DecoderLayer",
    )

    def __init__(self, cfg: dict):
        super().__init__()
        v, llm = cfg["vision_config"], cfg["llm_config"]
        self.vision_model = InternVisionModel(v)
        self.language_model = language_model(llm)
        wide = v["hidden_size"] * int(1 / cfg["downsample_ratio"]) ** 2
        self.mlp1 = nn.Sequential(
            nn.LayerNorm(wide),
            nn.Linear(wide, llm["hidden_size"]),
            nn.GELU(),
            nn.Linear(llm["hidden_size"], llm["hidden_size"]),
        )


def build(cfg: dict) -> nn.Module:
    return InternVLChatModel(cfg)
