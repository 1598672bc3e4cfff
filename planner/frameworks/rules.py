"""What a framework refuses beyond its values one by one: the Rule shape, what a placement rule sees (Where), and the
predicates on a request's knobs its adapters share (the workload's kind, LoRA on stacked experts, DeepSpeed's AutoTP)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    """What a framework's placement rule sees beyond the knobs: the GPUs, the model (a
    planner.model.modelspec.ModelSpec; None where unknown), whether the samples hold images, and for a split rule the
    micro-batch and accumulation."""

    gpus_per_node: int = 1
    nodes: int = 1
    model: object = None
    images: bool = False
    micro_batch: int | None = None
    grad_accum: int | None = None

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True)
class Rule:
    """A combination a framework refuses though it runs each value alone. `refuses(knobs)` true means refused; a rule
    with `scope` "layout" is `refuses(knobs, where)` (the GPUs and the model, whatever the split: the search prunes a
    knob family with it), "split" the same once the micro-batch and accumulation are known (a candidate), "written"
    `refuses(knobs, where)` (the model in `where`) for a plan the framework runs but its writer writes no file for at a release line (the search and
    the writer apply it; a reading of the user's own file does not)."""

    field: str
    reason: str | Callable[[dict, Where], str]
    refuses: Callable[..., bool]
    scope: str = "knobs"

    def says(self, knobs: dict, where: Where | None = None) -> str:
        return self.reason if isinstance(self.reason, str) else self.reason(knobs, where)


def kind(knobs: dict) -> str:
    w = knobs.get("workload")
    return (w.get("kind", "sft") if isinstance(w, dict) else getattr(w, "kind", "sft")) if w is not None else "sft"


def workload_of(knobs: dict):
    """The knobs' planner.config.workload.Workload; None where a reader's knobs still hold it as a dict (its rules
    run again on the Knobs it becomes)."""
    w = knobs.get("workload")
    return None if w is None or isinstance(w, dict) else w


def full_dpo_precomputed(knobs: dict) -> bool:
    """Full-parameter DPO with the reference's log-probs computed beforehand (TRL's precompute_ref_log_probs)."""
    w = knobs.get("workload")
    pre = w.get("precompute_ref_log_probs") if isinstance(w, dict) else getattr(w, "precompute_ref_log_probs", False)
    return kind(knobs) == "dpo" and not knobs.get("lora_rank") and bool(pre)


def expert_targets(knobs: dict) -> list[str]:
    """The stacked expert weights --lora-targets names (PEFT's target_parameters: planner.model.modelspec)."""
    if not knobs.get("lora_rank"):
        return []
    return [n for n in knobs["lora_targets"].split(",") if n.startswith("experts")]


def only_expert_targets(knobs: dict) -> bool:
    """LoRA on stacked experts alone: no module name left for a framework's target_modules."""
    names = knobs["lora_targets"].split(",") if knobs.get("lora_rank") else []
    return bool(names) and len(expert_targets(knobs)) == len(names)


# the parallel sizes a framework without them runs (the one value each: off)
NO_SPLITS = {"tensor_parallel": ("off",), "sequence_parallel": ("off",), "context_parallel": ("off",)}


def autotp_rule(where: str) -> Rule:
    """DeepSpeed's AutoTP (config `tensor_parallel.autotp_size`) runs beside ZeRO 1 and 2 only (`where`: the cite)."""
    return Rule(
        "tensor_parallel",
        f"--tensor-parallel runs through DeepSpeed's AutoTP, beside ZeRO 1 or 2 ({where}): give --zero 1 or 2",
        lambda k: k["tensor_parallel"] > 1 and (k["zero_stage"] not in (1, 2) or k["fsdp"] != "off"),
    )


def hf_ppo_rules(name: str, cite: str, written: str) -> tuple[Rule, Rule]:
    """A framework whose PPO runs every role in every process and samples with the policy's own HF generate (`name`
    its PPO, `cite` where it generates): it needs --rollout-engine hf, and memplan reads it but writes none
    (`written`: what memplan writes for it instead)."""
    return (
        Rule(
            "rollout_engine",
            f"{name} samples with the policy's own HF generate in every process ({cite}): give --rollout-engine hf",
            lambda k: kind(k) == "ppo" and (w := workload_of(k)) is not None and w.roles.rollout_engine != "hf",
        ),
        Rule(
            "workload",
            f"memplan writes {written}; {name} is read, not written",
            lambda k, w: kind(k) == "ppo",
            scope="written",
        ),
    )


# transformers 5 cannot train a compressed-tensors or HQQ base (planner.estimate.quant): PEFT >= 0.18 reads
# module.weight, which compressed-tensors >= 0.15 leaves absent until the first forward (get_peft_model raises:
# measured with compressed-tensors 0.20.1, PEFT 0.21.2, transformers 5.25), and HqqHfQuantizer has no quantize ops
# (5.25 quantizers/base.py get_quantize_ops raises: measured, transformers 5.25 cannot load an HQQ base; the same at
# 5.6.0 and 5.19.0, base.py:289 / :293, whose quantizer_hqq.py:153 create_quantized_param is commented out). The lines
# memplan plans on transformers 5 refuse them (runs_transformers_5, below: hf's 5 lines; TRL 1.x, its newest's defaults
# read at transformers 5.23, tools/fwenv_old.sh's trl-1.0.0 on 5.6.0; ms-swift 4, its keys at transformers 5.19,
# .fwenv/ms-swift's), naming each framework's line on transformers 4 instead.
TRANSFORMERS_4_INSTEAD = {
    "hf": "hf@4.54 (transformers 4.57)",
    "trl": "trl@0.22 (transformers 4.56-4.57)",
    "swift": "swift@3.9 (ms-swift 3.10's transformers 4.57)",
}


def kto_two_rows(where: str) -> Rule:
    """TRL's KTOTrainer refuses one row a device (its KL term pairs each row with its neighbour's completion): the
    rule of every framework running it, citing the check at `where` (file:lines of the release it runs)."""
    return Rule(
        "micro_batch",
        "KTO's KL term pairs each row with its neighbour's completion: TRL's KTOTrainer needs 2 or more rows per "
        f"device ({where})",
        lambda k, w: kind(k) == "kto" and w.micro_batch is not None and w.micro_batch < 2,
        scope="split",
    )


def peft_fp8_quant(framework: str, pins: str) -> Rule:
    """An FP8 compressed-tensors base (planner.config.knobfields.CT_FP8, by name: this stage is below the config)
    refused in one line where the framework pins PEFT below 0.19: PEFT up to 0.18 gives the adapter the base weight's
    float8 dtype, which AdamW cannot step (planner.estimate.quant)."""
    return Rule(
        "quant",
        f"{framework} pins peft < 0.19 ({pins}), whose LoRA on an FP8 compressed-tensors base is float8 itself and "
        "AdamW cannot step it: give --quant none with the unquantized model, or --framework hf@4.54 or trl@0.22 "
        "with peft >= 0.19",
        lambda k, w=None: (
            str(k.get("quant")).startswith("ct-") and str(k.get("quant")).endswith(("-fp8", "-fp8-block"))
        ),
    )


def transformers_5_quant(framework: str) -> Rule:
    """The rule of each framework in TRANSFORMERS_4_INSTEAD: --quant ct-w4a16 or hqq refused in one line at its lines
    on transformers 5, naming the framework's line on transformers 4."""
    return Rule(
        "quant",
        "transformers 5 cannot train a compressed-tensors or HQQ base (compressed-tensors 0.20.1 with PEFT 0.21.2: "
        f"get_peft_model raises; transformers 5.25 cannot load HQQ): give --framework {TRANSFORMERS_4_INSTEAD[framework]}",
        lambda k, w=None: (
            str(k.get("quant")).startswith(("ct-", "hqq")) and runs_transformers_5(framework, k.get("release", ""))
        ),
    )


# The lines each framework runs on transformers 4, whose MoE families build one nn.Linear an expert; every other line
# (each framework's newest, memplan's own trainer on transformers 5.25) runs transformers 5, which stacks them
# (planner.estimate.quant_modules). Read off each line's pin: hf's 4.x lines; TRL to 0.29 (trl-0 on 4.56.2, R1-V's
# trl 0.14 and VLM-R1's transformers 4.49, setup.py:65); ms-swift 3.x (requirements/framework.txt <4.58); LLaMA-Factory
# to 0.9.4 (Release.transformers, pyproject.toml:44 <=4.57.1; 0.9.5 takes <=5.6.0 and pip's 5.6.0); axolotl to 0.13
# (v0.13.2 requirements.txt:16 transformers==4.57.6; v0.14.0 :15 ==5.0.0); OpenRLHF to 0.9 (v0.9.0 requirements.txt transformers==
# 4.57.0; v0.10.0 ==5.5.0) and MM-EUREKA (OpenRLHF 0.6.1's).
TRANSFORMERS_4_LINES = {
    "hf": ("4", "4.54"),
    "trl": ("0.14", "0.15", "0.19", "0.22", "r1-v", "vlm-r1"),
    "trl-0": ("",),
    "swift": ("2", "3", "3.4", "3.7", "3.9"),
    "llamafactory": ("0.5", "0.6", "0.7", "0.7.1", "0.8", "0.9.1", "0.9.2", "0.9.3", "0.9.4"),
    "axolotl": ("0.4", "0.5", "0.7", "0.8", "0.12"),
    "openrlhf": ("0.8", "0.9", "mm-eureka"),
}


def runs_transformers_5(framework: str, release: str) -> bool:
    """Whether the plan's line (`framework`@`release`, "" its newest) runs transformers 5 (TRANSFORMERS_4_LINES)."""
    return release not in TRANSFORMERS_4_LINES.get(framework, ())


# A GPTQ or AWQ checkpoint of an MoE stores one packed linear an expert; transformers 5 builds the experts as two
# stacked parameters and its GPTQ/AWQ loaders replace nn.Linear modules only (5.23 integrations/awq.py:96) and convert
# no packed expert into them (quantizer_awq.py, quantizer_gptq.py: no weight conversions). Measured with transformers
# 5.23 and gptqmodel 7.7.0 on a tiny AWQ Qwen3-MoE (tests/probes/awq_moe.py): experts.gate_up_proj and
# experts.down_proj missing, the 36 packed expert tensors unexpected, the experts left as initialized fp16. GPTQ
# measured the same with optimum 2.3.0 (optimum/gptq/quantizer.py convert_model replaces the nn.Linear modules
# get_layers finds): on a tiny GPTQ Qwen3-MoE both stacked parameters of each layer missing, all 96 packed expert
# tensors unexpected, the experts left bf16 as initialized, attention alone quantized (tests/probes/test_gptq_tf5.py).
PREQUANT_LINE_4 = {
    "hf": "hf@4.54",
    "trl": "trl@0.22",
    "swift": "swift@3.9",
    "llamafactory": "llamafactory@0.9.4",
    "axolotl": "axolotl@0.8",
}


def stacked_experts(model) -> bool:
    """Whether the model (a planner.model.modelspec.ModelSpec) holds its routed experts as stacked parameters."""
    return any(t.name == "experts.gate_up_proj" and len(t.shape) == 3 for t in getattr(model, "tensors", ()))


def stacked_experts_prequant(framework: str) -> Rule:
    """--quant gptq or awq with a stacked-experts MoE on a line of `framework` that runs transformers 5: refused."""
    return Rule(
        "quant",
        lambda k, w: (
            f"--quant {k.get('quant')} with {w.model.name}'s experts on transformers 5: its loader quantizes "
            "nn.Linear only and loads the checkpoint's per-expert packed weights into none of the stacked experts "
            f"(measured with transformers 5.23 and gptqmodel 7.7.0): give --framework {PREQUANT_LINE_4[framework]}"
        ),
        lambda k, w: (
            k.get("quant") in ("gptq", "awq")
            and runs_transformers_5(framework, k.get("release", ""))
            and w is not None
            and stacked_experts(w.model)
        ),
        scope="layout",
    )


def thinker_alone(who: str, where: str) -> Rule:
    """A whole Omni with its talker resident (a `-with-talker` catalog model: planner/model/omnitalker.py) under a
    framework that loads the thinker alone (`where`: the source that says so): refused, naming the thinker."""
    return Rule(
        "framework",
        lambda k, w: (
            f"{who} keeps the Omni's thinker alone ({where}), where {w.model.name} plans its talker and vocoder "
            f"resident: name the catalog thinker ({w.model.name.removesuffix('-with-talker')})"
        ),
        lambda k, w: w is not None and w.model is not None and w.model.resident_params() > 0,
        "layout",
    )


# transformers added optim adamw_torch_4bit in 4.45.0 and adamw_torch_8bit in 4.49.0 (training_args.py OptimizerNames:
# tools/fwenv_old.sh's lf-0.8.3 on 4.43.4 has neither, lf-0.9.0 on 4.45.0 the 4-bit at :157, swift-3.0.3 on 4.48.3
# not the 8-bit, trl-0.15.2 on 4.49.0 both). The lines on an older transformers (Release.transformers or its pin):
TORCHAO_ADDED = {"adamw-torchao-4bit": "4.45.0", "adamw-torchao-8bit": "4.49.0"}
_BEFORE_4_45 = {"llamafactory": ("0.5", "0.6", "0.7", "0.7.1", "0.8"), "axolotl": ("0.4",)}  # 4.37.0 .. 4.43.4
_BEFORE_4_49 = {"llamafactory": ("0.9.1",), "axolotl": ("0.5",), "trl": ("0.14",), "swift": ("2", "3")}  # 4.46-4.48
TORCHAO_LACKING = {
    "adamw-torchao-4bit": _BEFORE_4_45,
    "adamw-torchao-8bit": {
        f: _BEFORE_4_45.get(f, ()) + _BEFORE_4_49.get(f, ()) for f in {*_BEFORE_4_45, *_BEFORE_4_49}
    },
}


def torchao_line_rules(framework: str) -> tuple[Rule, ...]:
    """--optimizer adamw-torchao-4bit / -8bit on a line of `framework` whose transformers predates the optim name."""
    return tuple(
        Rule(
            "optimizer",
            f"--optimizer {optimizer} is transformers' optim {name}, added in transformers {TORCHAO_ADDED[optimizer]}: "
            f"this line runs an older one; give a newer --framework {framework} line",
            lambda k, o=optimizer: (
                k.get("optimizer") == o and k.get("release", "") in TORCHAO_LACKING[o].get(framework, ())
            ),
        )
        for optimizer, name in (("adamw-torchao-4bit", "adamw_torch_4bit"), ("adamw-torchao-8bit", "adamw_torch_8bit"))
    )


# LoRA on the ends of a VLM (Knobs.lora_ends): planned with PEFT's own target list (the bundled trainer, HF, TRL),
# whose pattern over the language model's linears gains embed_tokens and lm_head (lora_targets.with_ends). A
# framework's own VLM list is not read for them: ms-swift's all-linear on a multimodal model keeps its language
# model's linears alone and drops the other names (v4.5.2 swift/pipelines/train/tuner.py:97-104)
VLM_LORA_ENDS = Rule(
    "lora_ends",
    "--lora-ends on a VLM is planned with PEFT's own target list (--framework hf, trl or memplan): this framework's "
    "VLM target lists were not read for the embedding and head (ms-swift's all-linear on a multimodal model, for one, keeps only "
    "its language model's linears, swift/pipelines/train/tuner.py:97-104)",
    lambda k, w: k.get("lora_ends", "none") != "none" and getattr(w.model, "vision", None) is not None,
    scope="layout",
)
