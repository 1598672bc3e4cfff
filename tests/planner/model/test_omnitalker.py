"""An Omni's talker and vocoder (planner/model/omnitalker.py, omni3talker.py): counted from config.json exactly as
transformers 5.25 builds them, tensor by tensor and dtype (the sweep tests build the whole classes on the meta device;
the default tier pins the counts they recompute), planned frozen and resident in the dtype they are built in
(Qwen2.5-Omni's token2wav fp32), never trained, never run by a training step, and refused where not planned.

Figures: qwen2.5-omni-3b-with-talker 5,537,120,640 = thinker 4,703,464,448 + talker 384,604,928 + token2wav
449,051,264 (11,972,343,936 bytes with the DiT's saved inv_freq: its checkpoint index's total_size);
qwen2.5-omni-7b-with-talker 10,732,225,408 = thinker 8,931,813,888 + talker 1,351,360,256 + token2wav
449,051,264 (the model card's "10.7B params"); qwen3-omni-30b-a3b-with-talker 35,259,818,545 = thinker 31,719,205,488 +
talker 3,324,596,480 + code2wav 216,016,577, the checkpoint's 15 shards' total (the library's file 62494955826)."""

from collections import Counter

import pytest

from planner import advise
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.estimate.microstep import collectives
from planner.estimate.setup import Setup
from planner.estimate.trained import frozen_bytes, frozen_params, trainable_params
from planner.model import catalog
from planner.model.modelspec import FROZEN_ROLES

# (whole catalog model, its thinker's, the transformers class, {module: (role, parameters, dtype)})
WHOLE = [
    (
        "qwen2.5-omni-3b-with-talker",
        "qwen2.5-omni-3b",
        "Qwen2_5OmniForConditionalGeneration",
        {"talker": ("talker", 384_604_928, "bf16"), "token2wav": ("token2wav", 449_051_264, "fp32")},
    ),
    (
        "qwen2.5-omni-7b-with-talker",
        "qwen2.5-omni-7b",
        "Qwen2_5OmniForConditionalGeneration",
        {"talker": ("talker", 1_351_360_256, "bf16"), "token2wav": ("token2wav", 449_051_264, "fp32")},
    ),
    (
        "qwen3-omni-30b-a3b-with-talker",
        "qwen3-omni-30b-a3b",
        "Qwen3OmniMoeForConditionalGeneration",
        {"talker": ("talker", 3_324_596_480, "bf16"), "code2wav": ("talker", 216_016_577, "bf16")},
    ),
]
# the model card's "10.7B params" (rounded); the Qwen2.5-Omni-3B and Qwen3-Omni-30B-A3B-Instruct checkpoints' shards,
# tensor by tensor (the 3B's: test_the_3b_checkpoint_is_its_index_total_size)
PUBLISHED = {
    "qwen2.5-omni-3b-with-talker": 5_537_120_640,
    "qwen2.5-omni-7b-with-talker": 10_732_225_408,
    "qwen3-omni-30b-a3b-with-talker": 35_259_818_545,
}
# Qwen/Qwen2.5-Omni-3B's model.safetensors.index.json metadata.total_size, bytes (vendored verbatim with its
# config.json in github.com/xygu/MusicQnA models/Qwen2.5-Omni-3B/ at 37bf9fc1af75a736b3fee8f590f3bd2f7fda63f3)
OMNI_3B_INDEX_TOTAL_SIZE_BYTES = 11_972_343_936


@pytest.mark.parametrize("name,thinker,cls,parts", WHOLE)
def test_the_whole_checkpoints_are_thinker_talker_and_vocoder(name, thinker, cls, parts):
    whole, alone = catalog.load_model(name), catalog.load_model(thinker)
    roles = Counter()
    for role, n, _ in parts.values():
        roles[role] += n
    assert {r: whole.params_by_role().get(r, 0) for r in roles} == dict(roles)
    assert whole.params == alone.params + sum(roles.values()) == PUBLISHED[name]


def test_the_3b_checkpoint_is_its_index_total_size():
    """The 3B checkpoint's shards (2,544 tensors): thinker and talker in bf16, the token2wav in fp32 (its dit_config's
    torch_dtype float32), and one buffer saved beside the weights, the DiT's rotary inv_freq (head_dim 64: 32 fp32),
    exactly its index's total_size (tolerance 0 bytes)."""
    whole = catalog.load_model("qwen2.5-omni-3b-with-talker")
    t2w = whole.params_by_role()["token2wav"]
    head_dim = catalog.model_config("qwen2.5-omni-3b-with-talker")["token2wav_config"]["dit_config"]["head_dim"]
    inv_freq_bytes = head_dim // 2 * 4  # token2wav.code2wav_dit_model.rotary_embed.inv_freq, in the index's map
    assert (whole.params - t2w) * 2 + t2w * 4 + inv_freq_bytes == OMNI_3B_INDEX_TOTAL_SIZE_BYTES


@pytest.mark.parametrize("name,thinker,cls,parts", WHOLE)
def test_the_talker_is_frozen_resident_and_never_run(name, thinker, cls, parts):
    whole, alone = catalog.load_model(name), catalog.load_model(thinker)
    resident = whole.resident_params()
    for frozen in FROZEN_ROLES:  # every setting freezes it (ms-swift: swift/arguments/tuner_args.py:216)
        assert whole.frozen_params(frozen) == alone.frozen_params(frozen) + resident
    full = Knobs(precision="bf16", zero_stage=3)
    w, a = (Setup(m, full, 1, 1, 2048, gpus_per_node=8) for m in (whole, alone))
    assert trainable_params(w) == trainable_params(a)  # no gradient, no optimizer state
    assert collectives(w) == collectives(a)  # ZeRO-3 never gathers it: its modules never run
    assert whole.lora_params(8) == alone.lora_params(8)  # LoRA's all-linear adapts the thinker's decoder alone
    assert whole.active_params == alone.active_params  # ms-swift's forward is the thinker's


def test_the_token2wav_is_held_in_fp32_beside_a_half_precision_base():
    whole, alone = catalog.load_model("qwen2.5-omni-7b-with-talker"), catalog.load_model("qwen2.5-omni-7b")
    talker, t2w = 1_351_360_256, 449_051_264
    for knobs, width in ((Knobs(precision="bf16", lora_rank=8), 2), (Knobs(precision="fp32", lora_rank=8), 4)):
        w, a = (Setup(m, knobs, 1, 1, 2048) for m in (whole, alone))
        assert frozen_params(w) - frozen_params(a) == talker + t2w
        assert frozen_bytes(w) - frozen_bytes(a) == talker * width + t2w * 4  # 4.19 GiB at bf16, 6.71 GiB at fp32


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_deepspeed_casts_the_token2wav_to_the_half_dtype(zero):
    """DeepSpeed's engine casts every floating parameter to bf16/fp16 (trained.fp32_resident_extra_bytes cites it):
    the vocoder is as wide as the base (fp32: both 4 bytes)."""
    whole, alone = catalog.load_model("qwen2.5-omni-7b-with-talker"), catalog.load_model("qwen2.5-omni-7b")
    talker, t2w = 1_351_360_256, 449_051_264
    for precision, width in (("bf16", 2), ("fp16", 2), ("fp32", 4)):
        knobs = Knobs(precision=precision, lora_rank=8, zero_stage=zero)
        w, a = (Setup(m, knobs, 1, 1, 2048, 2) for m in (whole, alone))
        assert frozen_bytes(w) - frozen_bytes(a) == (talker + t2w) * width


@pytest.mark.parametrize("fsdp", ["full", "off"])
def test_fsdp_and_a_device_map_with_the_talker_resident_are_refused_in_one_line(fsdp):
    base = {"model": "qwen2.5-omni-7b-with-talker", "gpu": "h100", "micro_batch": 1, "seq_len": 1024}
    base["framework"] = "swift"  # ms-swift runs both (memplan's own trainer runs no device map)
    request = {**base, "fsdp": fsdp, "gpus_per_node": 2} if fsdp != "off" else {**base, "device_map": 2}
    with pytest.raises(BadInput) as e:
        advise.check(advise.parse(advise.CheckRequest, request))
    assert "resident talker" in str(e.value) and "ENABLE_AUDIO_OUTPUT=0" in str(e.value) and "\n" not in str(e.value)


def _meta_parts(cls_name: str, cfg: dict) -> dict:
    """{module: (Counter of (shape, dtype), dtypes)} of the whole class built from cfg on the meta device in bf16, as
    from_pretrained(dtype=torch.bfloat16) builds it (its default dtype set while the modules are made)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = dict(cfg)
    hf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("meta"):
            model = getattr(transformers, cls_name)(hf)
    finally:
        torch.set_default_dtype(before)
    out: dict = {}
    for n, p in model.named_parameters():
        dtype = {torch.bfloat16: "bf16", torch.float32: "fp32"}[p.dtype]
        out.setdefault(n.split(".")[0], Counter())[(tuple(p.shape), dtype)] += 1
    return out


@pytest.mark.sweep
@pytest.mark.parametrize("name,thinker,cls,parts", WHOLE)
def test_each_tensor_and_dtype_is_transformers_meta_build(name, thinker, cls, parts):
    """Every talker and vocoder tensor, shape by shape, and the dtype it is built in (token2wav fp32: transformers
    5.25 modeling_qwen2_5_omni.py:3740), against Qwen2_5OmniForConditionalGeneration / Qwen3OmniMoeForConditional
    Generation on the meta device (2 s each); the thinker's count too (test_catalog builds the thinker alone)."""
    meta = _meta_parts(cls, catalog.model_config(name))
    spec = catalog.load_model(name)
    held = {role: dtype for role, _, dtype in parts.values()}  # the dtype each role is planned in
    for role, dtype in held.items():
        mine = Counter()
        for t in spec.tensors:
            mine[(t.shape, dtype)] += t.count if t.role == role else 0
        theirs = sum((meta[m] for m, p in parts.items() if p[0] == role), Counter())
        assert +mine == theirs
    for module, (_, n, _) in parts.items():
        assert sum(c * _numel(shape) for (shape, _), c in meta[module].items()) == n
    thinker_params = sum(c * _numel(shape) for (shape, _), c in meta["thinker"].items())
    assert thinker_params == catalog.load_model(thinker).params


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@pytest.mark.sweep
def test_from_pretrained_keeps_the_token2wav_fp32_in_a_half_precision_load(tmp_path):
    """The measurement behind FP32_ROLES: a small Qwen2.5-Omni saved in fp32 and loaded by from_pretrained at bf16
    and fp16 holds its thinker and talker in the load dtype and every token2wav tensor (198 here) in fp32."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    text = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64}
    audio = {"encoder_layers": 1, "d_model": 32, "encoder_attention_heads": 2, "encoder_ffn_dim": 64, "output_dim": 64}
    talker = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
    dit = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 16, "emb_dim": 16}
    dit |= {"enc_emb_dim": 8, "enc_dim": 8, "enc_channels": [16, 16, 48], "enc_kernel_sizes": [5, 3, 1]}
    dit |= {"enc_dilations": [1, 2, 1], "enc_attention_channels": 8, "enc_se_channels": 8}
    dit |= {"look_ahead_layers": [0], "look_backward_layers": [0]}
    cfg = transformers.Qwen2_5OmniConfig(
        thinker_config={
            "text_config": {**text, "num_key_value_heads": 2, "vocab_size": 1000},
            "vision_config": {**vision, "fullatt_block_indexes": [0]},
            "audio_config": audio,
        },
        talker_config={**talker, "num_key_value_heads": 1, "head_dim": 16, "embedding_size": 64, "vocab_size": 300},
        token2wav_config={
            "dit_config": dit,
            "bigvgan_config": {
                "upsample_initial_channel": 32,
                "upsample_rates": [2, 2],
                "upsample_kernel_sizes": [4, 4],
            },
        },
        enable_audio_output=True,
    )
    transformers.Qwen2_5OmniForConditionalGeneration(cfg).save_pretrained(tmp_path)
    torch.save({}, tmp_path / "spk_dict.pt")  # from_pretrained loads the speakers too
    for dtype in (torch.bfloat16, torch.float16):
        model = transformers.Qwen2_5OmniForConditionalGeneration.from_pretrained(tmp_path, dtype=dtype)
        held = {
            part: {p.dtype for p in getattr(model, part).parameters()} for part in ("thinker", "talker", "token2wav")
        }
        assert held == {"thinker": {dtype}, "talker": {dtype}, "token2wav": {torch.float32}}
        assert sum(1 for _ in model.token2wav.parameters()) == 198


def test_llamafactory_over_a_config_that_builds_the_talker_is_refused_in_one_line(tmp_path):
    """LLaMA-Factory keeps the thinker alone (loader.py:173-174): a whole config with its talker would be planned with
    it, so the reading refuses it; the catalog thinker is planned as before."""
    import json

    from planner import intake

    (tmp_path / "omni").mkdir()
    (tmp_path / "omni" / "config.json").write_text(json.dumps(catalog.model_config("qwen2.5-omni-7b-with-talker")))
    path = tmp_path / "train.yaml"
    for model in (tmp_path / "omni", "Qwen/Qwen2.5-Omni-7B"):
        path.write_text(f"model_name_or_path: {model}\nstage: sft\nfinetuning_type: lora\ncutoff_len: 1024\n")
        if model == "Qwen/Qwen2.5-Omni-7B":
            assert intake.read([str(path)]).request["model"] == "qwen2.5-omni-7b"
            continue
        with pytest.raises(BadInput) as e:
            intake.read([str(path)])
        assert "thinker alone" in str(e.value) and "enable_audio_output false" in str(e.value)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("framework,refused", [("llamafactory", True), ("swift", False)])
def test_a_with_talker_model_named_for_llamafactory_is_refused_in_one_line(framework, refused):
    """LLaMA-Factory keeps the thinker alone (loader.py:173-174): `--model qwen2.5-omni-7b-with-talker --framework
    llamafactory` named the talker it never loads; ms-swift, which loads it, plans it."""
    body = {"model": "qwen2.5-omni-7b-with-talker", "gpu": "h100", "micro_batch": 1, "seq_len": 1024}
    request = advise.parse(advise.CheckRequest, {**body, "framework": framework, "lora_rank": 16})
    if not refused:
        assert advise.check(request).plan.memory.params_bytes > 0
        return
    with pytest.raises(BadInput) as e:
        advise.check(request)
    assert "thinker alone" in str(e.value) and "(qwen2.5-omni-7b)" in str(e.value) and "\n" not in str(e.value)
