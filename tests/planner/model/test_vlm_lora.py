"""A VLM's LoRA targets (planner.model.lora_targets.peft_target_modules): PEFT (0.22.0, constraints.txt) applied to
a small Qwen2.5-VL and InternVL built from their catalog configs adapts exactly the language model's linears the plan
counts, and the planned adapter parameters equal PEFT's, where a bare all-linear would adapt the vision tower and
projector too."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
from planner.model.catalog import model_config
from planner.model.families import from_config
from planner.model.lora_targets import peft_target_modules, peft_target_parameters
from tests.planner.model.vlms import VLMS


def small(name: str) -> dict:
    """The catalog config with two text layers and a two-block tower (sizes kept: the counts are exact anyway)."""
    cfg = model_config(name)
    vision = dict(cfg["vision_config"])
    for key in ("depth", "num_hidden_layers"):
        if key in vision:
            vision[key] = 2
    if "fullatt_block_indexes" in vision:
        vision["fullatt_block_indexes"] = [1]
    if "deepstack_visual_indexes" in vision:
        vision["deepstack_visual_indexes"] = [0, 1]
    if "num_global_layers" in vision:  # Llama-3.2-Vision: one gated layer, one cross-attention decoder layer
        vision["num_global_layers"] = 1
        cfg = {**cfg, "text_config": {**cfg["text_config"], "cross_attention_layers": [1]}}
    if "text_config" in cfg:  # InternVL; Qwen2.5-VL's catalog config keeps its text fields at the top level
        return {**cfg, "text_config": {**cfg["text_config"], "num_hidden_layers": 2}, "vision_config": vision}
    return {**cfg, "num_hidden_layers": 2, "vision_config": vision}


def adapted(cfg: dict, target_modules, target_parameters=None) -> tuple[set[str], int]:
    conf = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(conf)
    config = peft.LoraConfig(r=8, target_modules=target_modules, target_parameters=target_parameters)
    lora = peft.get_peft_model(model, config)
    names = {n.removesuffix(".lora_A") for n, _ in lora.named_modules() if n.endswith(".lora_A")}
    count = sum(p.numel() for n, p in lora.named_parameters() if ".lora_" in n)
    return names, count


@pytest.mark.parametrize("name", VLMS)
@pytest.mark.parametrize("targets", ["all-linear", "attention", "gate_proj,down_proj"])
def test_peft_adapts_exactly_the_planned_linears(name, targets):
    cfg = small(name)
    spec = from_config(cfg, name)
    if "gate_proj" not in spec.linear_names():  # every layer routed (Qwen3-VL-MoE): --lora-targets refuses the name
        assert targets != "gate_proj,down_proj" or peft_target_modules(targets, spec) is None
        targets = "q_proj,experts.gate_up_proj" if targets == "gate_proj,down_proj" else targets
    names, count = adapted(cfg, peft_target_modules(targets, spec), peft_target_parameters(targets))
    assert names and all(".language_model." in n or ".text_model." in n for n in names)
    assert count == spec.lora_params(8, targets)


@pytest.mark.parametrize("name", VLMS)
def test_lora_vision_is_peft_all_linear_on_the_whole_model(name):
    """--lora-vision: PEFT's all-linear adapts every Linear of the tower and the projector beside the decoder's."""
    cfg = small(name)
    spec = from_config(cfg, name)
    names, count = adapted(cfg, peft_target_modules("all-linear", spec, vision=True))
    assert any(not (".language_model." in n or ".text_model." in n) for n in names)
    assert count == spec.lora_params(8, "all-linear") + spec.tower_lora_params(8)


def test_bare_all_linear_would_adapt_the_tower():
    names, _ = adapted(small("qwen2.5-vl-3b"), "all-linear")
    assert any(".visual." in n for n in names)


def test_trl_passes_the_pattern_to_peft_as_one_string():
    """The TRL command's --lora_target_modules reaches LoraConfig as the pattern itself, not a list of names."""
    import shlex

    from trl import ModelConfig, TrlParser

    from planner import advise

    body = {"model": "qwen2.5-vl-7b", "gpu": "h100", "micro_batch": 1, "seq_len": 2048, "lora_rank": 16}
    plan = advise.check(advise.parse(advise.CheckRequest, {**body, "framework": "trl"})).plan
    words = shlex.split(plan.launch.command)
    (args,) = TrlParser((ModelConfig,)).parse_args_into_dataclasses(
        ["--model_name_or_path", "x", "--lora_target_modules", words[words.index("--lora_target_modules") + 1]]
    )
    assert args.lora_target_modules == plan.launch.peft_config["target_modules"]
    assert r"language_model\." in args.lora_target_modules


def internvl_routed(text_type: str) -> dict:
    """InternVL3.5's MoE layout (a Qwen3-MoE or gpt-oss language model under InternViT), small."""
    text = {"model_type": text_type, "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4}
    text |= {"num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1000}
    text |= {"num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 128}
    return {**small("internvl3-8b"), "text_config": text}


@pytest.mark.parametrize("text_type", ["qwen3_moe", "gpt_oss"])
@pytest.mark.parametrize("targets", ["all-linear", "q_proj,experts.gate_up_proj"])
def test_internvl_with_routed_experts_counts_and_adapts_as_built(text_type, targets):
    """Issue 49 item 4 (InternVL3.5's MoE models, refused before): the meta-device build's count, and PEFT's
    adapters where all-linear is the language model's pattern (no expert) and experts are target_parameters."""
    cfg = internvl_routed(text_type)
    spec = from_config(cfg, "internvl-moe")
    conf = transformers.AutoConfig.for_model("internvl", **{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        assert spec.params == sum(
            p.numel() for p in transformers.AutoModelForImageTextToText.from_config(conf).parameters()
        )
    _, count = adapted(cfg, peft_target_modules(targets, spec), peft_target_parameters(targets))
    assert count == spec.lora_params(8, targets)


def test_glm45v_experts_are_reached_by_the_pattern_and_the_tower_too_from_peft_022():
    """GLM-4.5V's language model adapted by memplan's pattern, in a family PEFT maps (moespec.PATTERN_MAPS): PEFT
    0.22.0 (constraints.txt) maps the MLP names the pattern spells onto the stacked experts, which the plan counts
    (attention, dense and shared MLPs, experts: 20,973,056 at rank 8 on the two-layer cut; PEFT 0.21.2 drops the MLPs:
    20,480,000, planner.frameworks.peft), and its leaf names reach the tower's and merger's MLP too (631,296), which
    the plan keeps frozen: refused in one line on the lines that hand PEFT the pattern."""
    from planner import advise
    from planner.errors import BadInput

    cfg = small("glm-4.5v")
    spec = from_config(cfg, "glm-4.5v")
    conf = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(conf)
    lora = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=peft_target_modules("all-linear", spec)))
    counts = {"tower": 0, "text": 0}
    for n, p in lora.named_parameters():
        if ".lora_" in n:
            counts["tower" if ".visual." in n else "text"] += p.numel()
    assert counts["text"] == spec.lora_params(8, "all-linear") == 20_973_056
    assert counts["tower"] == 631_296
    body = {"model": "glm-4.5v", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 2048}
    with pytest.raises(BadInput, match="also adapt the vision tower's and merger's MLP"):
        advise.check(advise.parse(advise.CheckRequest, {**body, "lora_rank": 16, "zero_stage": 3}))
    ok = advise.check(
        advise.parse(advise.CheckRequest, {**body, "lora_rank": 16, "zero_stage": 3, "lora_targets": "attention"})
    )
    assert ok.plan.lora_targets == "attention"
