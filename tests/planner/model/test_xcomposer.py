"""InternLM-XComposer2 (planner/model/xcomposer.py), counted in its repository's module names: a tiny model built here
in torch from the remote code's structure (PLoRA: an nn.Linear with its own Plora_A / Plora_B; InternLM2's wqkv, wo,
w1, w3, w2 and two RMSNorms a layer; transformers' CLIPVisionModel at 35 x 35 positions; vision_proj's two Linears)
has memplan's count, exactly; the PLoRA's saved tensors per image token, measured by autograd's saved-tensor hooks,
are memplan's plus the boolean image mask the index operations keep (a byte a token, left out of the term)."""

import pytest

from planner.model import catalog, xcomposer
from planner.model.families import from_config

# internlm/internlm-xcomposer2-7b: InternLM2-7B (7,737,708,544) + its PLoRAs (603,979,776) + CLIP-L/14 at 490 pixels
# (304,172,032) + vision_proj (20,979,712)
XCOMPOSER2_7B = 8_666_840_064
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
TINY |= {"intermediate_size": 96, "vocab_size": 100}


def _plora(nn, d_in: int, d_out: int):
    m = nn.Linear(d_in, d_out, bias=False)
    m.Plora_A, m.Plora_B = nn.Linear(d_in, 256, bias=False), nn.Linear(256, d_out, bias=False)
    return m


def _tiny_xcomposer(torch, transformers, cfg: dict):
    nn = torch.nn
    h, heads, kv, inter = (
        cfg[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size")
    )
    hd = h // heads
    model = nn.Module()
    model.tok_embeddings, model.norm = nn.Embedding(cfg["vocab_size"], h), nn.RMSNorm(h)
    model.layers = nn.ModuleList()
    for _ in range(cfg["num_hidden_layers"]):
        layer = nn.Module()
        layer.wqkv, layer.wo = _plora(nn, h, (heads + 2 * kv) * hd), _plora(nn, heads * hd, h)
        layer.w1, layer.w3, layer.w2 = _plora(nn, h, inter), _plora(nn, h, inter), _plora(nn, inter, h)
        layer.attention_norm, layer.ffn_norm = nn.RMSNorm(h), nn.RMSNorm(h)
        model.layers.append(layer)
    top = nn.Module()
    top.model, top.output = model, nn.Linear(h, cfg["vocab_size"], bias=False)
    clip = transformers.CLIPVisionConfig(  # CLIP-L/14 with resize_pos's 35 x 35 positions and the CLS
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=24,
        num_attention_heads=16,
        patch_size=14,
        image_size=cfg["img_size"],
    )
    top.vit = transformers.CLIPVisionModel(clip)
    top.vision_proj = nn.Sequential(nn.Linear(1024, h), nn.GELU(), nn.Linear(h, h))
    return top


def test_xcomposer2_equals_its_modules_built_on_meta():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = {**catalog.model_config("internlm-xcomposer2-7b"), **TINY}
    with torch.device("meta"):
        real = _tiny_xcomposer(torch, transformers, cfg)
    m = from_config(cfg, "tiny")
    assert m.params == sum(p.numel() for p in real.parameters())
    vision = sum(t.numel for t in m.tensors if t.role == "vision")
    assert vision == sum(p.numel() for p in real.vit.parameters()) == 304_172_032  # CLIP-L/14, 1,226 positions


def test_xcomposer2_7b_count_and_lora_targets():
    m = catalog.load_model("internlm-xcomposer2-7b")
    h, kv, ff, L = 4096, 1024, 14336, 32
    plora = 256 * L * ((h + h + 2 * kv) + 2 * h + 3 * (h + ff))
    assert plora == 603_979_776 and m.params == XCOMPOSER2_7B and m.exact
    # ms-swift 2.x's DEFAULT LoRA (wqkv, wo, w1, w2, w3) beside the PLoRAs, never on Plora_A / Plora_B
    assert m.lora_params(8, "all-linear") == 8 * L * ((h + h + 2 * kv) + 2 * h + 3 * (h + ff))
    assert m.vision.attention_tokens == 35 * 35 + 1 and xcomposer.image_tokens(m.config) == 1225


@pytest.mark.parametrize("trained", [False, True])
def test_plora_saved_bytes_per_image_token_as_autograd_saves_them(trained):
    """One layer's five PLoRAs (w1 and w3 on one input) in bf16 over 16 tokens, 8 of them image tokens: the saved
    tensors beyond the same Linears' without the image path, per image token."""
    torch = pytest.importorskip("torch")
    nn, h, inter, n, img = torch.nn, 64, 96, 16, 8
    spec = from_config({**catalog.model_config("internlm-xcomposer2-7b"), **TINY}, "tiny").text
    shapes = [(h, (4 + 2 * 2) * 16), (h, h), (h, inter), (h, inter), (inter, h)]  # (in, out); 4 heads, 2 kv heads

    def saved(image: int) -> int:
        torch.manual_seed(0)
        mods = [_plora(nn, i, o).to(torch.bfloat16) for i, o in shapes]
        params = {p.data_ptr() for m in mods for p in m.parameters()}
        for m in mods:
            m.weight.requires_grad_(False)
            m.Plora_A.requires_grad_(trained), m.Plora_B.requires_grad_(trained)
        mask = torch.zeros(n, dtype=torch.bool)
        mask[:image] = True
        total = 0

        def pack(t):
            nonlocal total
            if t.data_ptr() not in params:
                total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            for m, (i, _) in zip(mods, shapes, strict=True):
                x = torch.randn(n, i, dtype=torch.bfloat16, requires_grad=True)
                res = m(x)  # the Linear's own product; then the image rows' low-rank pair, dropped out, scaled
                if image:
                    res = res.clone()
                    dropped = torch.native_dropout(x[mask], 0.05, True)[0]  # F.dropout's CUDA kernel: a bool mask
                    res[mask] += m.Plora_B(m.Plora_A(dropped)) * 1.0
        return total

    # beyond the term: each PLoRA's three index operations keep the boolean im_mask, a byte a token of the row
    # (0.1% of the term for a 490-pixel image in a 3,273-token row)
    im_masks = 3 * len(shapes) * n / img
    assert (saved(img) - saved(0)) / img == xcomposer.plora_saved_bytes_per_image_token(spec, trained, 2) + im_masks


# internlm/internlm-xcomposer2d5-7b: InternLM2-7B (7,737,708,544) + its PLoRAs (603,979,776) + the write and web
# modes' pairs (2 x 603,979,776 + 1,207,959,552) + CLIP-L/14 at 560 pixels (304,556,032) + vision_proj
# (33,562,624) + the two separators (8,192)
XCOMPOSER2D5_7B = 11_095_734_272
# the Hub's bf16 shards of it (internlm/internlm-xcomposer2d5-7b, model-0000{1,2,3}-of-00003.safetensors, the same
# sizes as its pytorch_model-*.bin of BFloat16Storage): 9.97, 10 and 2.22 GB, each rounded to 10 MB
SHARDS_GB, SHARD_ROUNDING_GB = (9.97, 10.0, 2.22), 0.005


def _tiny_xcomposer2d5(torch, transformers, cfg: dict):
    """2.5's modules (build_mlp.py PLoRA with lora_sft / lora_dpo / lora_web beside Plora; a 560-pixel CLIP-L;
    vision_proj over 2 x 2 merged patches; plora_glb_GN and plora_sub_GN, 4096 wide in the code, the 7B's hidden
    size, here the tiny model's)."""
    nn = torch.nn
    top = _tiny_xcomposer(torch, transformers, {**cfg, "img_size": 560})
    for layer in top.model.layers:
        for lin in (layer.wqkv, layer.wo, layer.w1, layer.w3, layer.w2):
            for prefix, r in (("lora_sft", 256), ("lora_dpo", 256), ("lora_web", 512)):
                setattr(lin, f"{prefix}_A", nn.Linear(lin.in_features, r, bias=False))
                setattr(lin, f"{prefix}_B", nn.Linear(r, lin.out_features, bias=False))
    h = cfg["hidden_size"]
    top.vision_proj = nn.Sequential(nn.Linear(4 * 1024, h), nn.GELU(), nn.Linear(h, h))
    top.plora_glb_GN, top.plora_sub_GN = nn.Parameter(torch.zeros(1, 1, h)), nn.Parameter(torch.zeros(1, 1, 1, h))
    return top


def test_xcomposer2d5_equals_its_modules_built_on_meta():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = {**catalog.model_config("internlm-xcomposer2d5-7b"), **TINY}
    assert xcomposer.is_2d5(cfg) and not xcomposer.is_2d5(catalog.model_config("internlm-xcomposer2-7b"))
    with torch.device("meta"):
        real = _tiny_xcomposer2d5(torch, transformers, cfg)
    m = from_config(cfg, "tiny")
    assert m.params == sum(p.numel() for p in real.parameters())
    vision = sum(t.numel for t in m.tensors if t.role == "vision")
    assert vision == sum(p.numel() for p in real.vit.parameters()) == 304_556_032  # CLIP-L/14, 1,601 positions
    projector = sum(t.numel for t in m.tensors if t.role == "projector")
    assert projector == sum(p.numel() for p in real.vision_proj.parameters())


def test_xcomposer2d5_7b_count_is_its_checkpoints_bytes():
    m = catalog.load_model("internlm-xcomposer2d5-7b")
    assert m.params == XCOMPOSER2D5_7B and m.exact and m.model_type == xcomposer.MODEL_TYPE
    assert m.vision.attention_tokens == 40 * 40 + 1 and m.vision.patches_per_token == 4
    assert xcomposer.image_tokens(m.config) is None  # its image's tokens follow the image (hd_tokens)
    assert abs(2 * m.params / 1e9 - sum(SHARDS_GB)) <= len(SHARDS_GB) * SHARD_ROUNDING_GB
    # ms-swift's LoRA adapts the five linears, never a PLoRA's or a mode's pair
    h, kv, ff, L = 4096, 1024, 14336, 32
    assert m.lora_params(8, "all-linear") == 8 * L * ((h + h + 2 * kv) + 2 * h + 3 * (h + ff))


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (4, 6), (24, 1)])
def test_hd_tokens_as_the_towers_layout_makes_them(rows, cols):
    """2.5's image sequence: the global view's 40 x 40 patches merged 2 x 2 into a 20 x 20 grid with a separator
    ending each row, one separator, then the tiles' grids side by side, 20 x rows rows of 20 x cols tokens, each
    row ending in a separator: built here with tensors of a few channels and counted."""
    torch = pytest.importorskip("torch")
    c, side = 3, 40
    feats = torch.zeros(1 + rows * cols, side, side, c)

    def merged(x):  # (n, 40, 40, c) -> (n, 20, 20, 4c)
        n = x.shape[0]
        return x.reshape(n, side // 2, 2, side // 2, 2, c).permute(0, 1, 3, 2, 4, 5).reshape(n, 20, 20, 4 * c)

    glb = merged(feats[:1])[0]
    glb = torch.cat([glb, torch.zeros(20, 1, 4 * c)], dim=1).reshape(-1, 4 * c)
    tiles = (
        merged(feats[1:]).reshape(rows, cols, 20, 20, 4 * c).permute(0, 2, 1, 3, 4).reshape(20 * rows, 20 * cols, -1)
    )
    tiles = torch.cat([tiles, torch.zeros(20 * rows, 1, 4 * c)], dim=1).reshape(-1, 4 * c)
    seq = torch.cat([glb, torch.zeros(1, 4 * c), tiles])
    assert seq.shape[0] == xcomposer.hd_tokens(rows, cols)
