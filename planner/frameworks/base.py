"""The shape of a framework adapter: what it runs, its defaults, its keys, and the one-line refusal of a knob it
cannot run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# the knobs a framework restricts, in the order a refusal names them
RESTRICTED = (
    "workload",
    "checkpointing",
    "loss",
    "attention",
    "batching",
    "zero_stage",
    "offload",
    "fsdp",
    "optimizer",
    "quant",
    "optimizer_in_backward",
    "expert_parallel",
    "frozen",
    "lora_vision",
    "vit_checkpointing",
    "lora_rank",
    "tensor_parallel",
    "sequence_parallel",
    "context_parallel",
    "cp_attention",
)
PARALLEL = ("expert_parallel", "tensor_parallel", "sequence_parallel", "context_parallel")


@dataclass(frozen=True)
class Default:
    """A framework's default for a memplan field, and where it was read (file:line at the pinned version)."""

    value: object
    source: str


@dataclass(frozen=True)
class Rule:
    """A combination a framework refuses though it runs each value alone: `refuses(knobs)` true means refused."""

    field: str
    reason: str
    refuses: Callable[[dict], bool]


def kind(knobs: dict) -> str:
    w = knobs.get("workload")
    return (w.get("kind", "sft") if isinstance(w, dict) else getattr(w, "kind", "sft")) if w is not None else "sft"


def full_dpo_precomputed(knobs: dict) -> bool:
    """Full-parameter DPO with the reference's log-probs computed beforehand (TRL's precompute_ref_log_probs)."""
    w = knobs.get("workload")
    pre = w.get("precompute_ref_log_probs") if isinstance(w, dict) else getattr(w, "precompute_ref_log_probs", False)
    return kind(knobs) == "dpo" and not knobs.get("lora_rank") and bool(pre)


# the parallel sizes a framework without them runs (the one value each: off)
NO_SPLITS = {"tensor_parallel": ("off",), "sequence_parallel": ("off",), "context_parallel": ("off",)}


def autotp_rule(where: str) -> Rule:
    """DeepSpeed's AutoTP (config `tensor_parallel.autotp_size`) runs beside ZeRO 1 and 2 only (`where`: the cite)."""
    return Rule(
        "tensor_parallel",
        f"--tensor-parallel runs through DeepSpeed's AutoTP, beside ZeRO 1 or 2 ({where}): give --zero 1 or 2",
        lambda k: k["tensor_parallel"] > 1 and (k["zero_stage"] not in (1, 2) or k["fsdp"] != "off"),
    )


@dataclass(frozen=True)
class Framework:
    name: str
    label: str
    version: str  # the pinned version its defaults and keys were read from
    runs: dict[str, tuple]  # knob -> the values it runs; a knob not listed: every value
    defaults: dict[str, Default] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # memplan field -> the framework's own key or flag
    notes: tuple[str, ...] = ()  # how it differs, one line each (the frameworks table)
    rules: tuple[Rule, ...] = ()  # combinations it refuses
    # how it spends memory apart from the recipe (the terms stay in planner.estimate): "recipe", the plan's --loss as
    # memplan runs it; "fused-logprob", TRL's fused log-prob head for SFT (no full logits, whatever the model);
    # "swift-sp", ms-swift's own per-token loss under sequence parallel (recipe_terms.swift_sp_loss_bytes)
    sft_head: str = "recipe"
    # FSDP2's reduce dtype under bf16: "fp32" (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), the bundled
    # trainer's recipe.shard_fsdp) or "param" (accelerate's default policy reduces in the param dtype,
    # accelerate/utils/dataclasses.py:2135-2137, accelerate 1.15.0: what HF's Trainer and the frameworks on it run)
    fsdp_reduce: str = "param"
    # FSDP gradient accumulation: True skips the reduce-scatter on all but the last micro-step (HF Trainer's
    # accelerator.no_sync: unsharded gradients between micro-steps); False reduce-scatters every micro-step
    fsdp_no_sync: bool = True
    # whose loop loads the model and saves checkpoints (planner.estimate.lifecycle): "hf", HF's Trainer through
    # accelerate (the frameworks on it too); "bundled", the bundled trainer (trainer/, recipe/model.py)
    loop: str = "hf"
    # which code it builds a model id with (planner.model.catalog.checkpoints): True, the repository's own modeling
    # code where the checkpoint ships one (trust_remote_code); False, transformers' classes only (a remote-code
    # model is then named by its native conversion); None, not read for this framework yet (the catalog id)
    remote_code: bool | None = None

    def value_of(self, knob: str, value: object) -> object:
        """The value as `runs` names it: workloads by kind, LoRA and the parallel sizes as on/off."""
        if knob == "workload":
            return kind({"workload": value})
        if knob == "lora_rank" or knob in PARALLEL:
            return "off" if value in (0, 1) else "on"
        return value

    def cannot(self, knobs: dict) -> tuple[str, str] | None:
        """(field, one-line reason) for the first knob this framework cannot run, else None."""
        for knob in RESTRICTED:
            if knob not in self.runs or knob not in knobs:
                continue
            value = self.value_of(knob, knobs[knob])
            if value not in self.runs[knob]:
                flag = "--" + ("zero" if knob == "zero_stage" else knob.replace("_", "-"))
                shown = {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
                runs = ", ".join(
                    str({True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v) for v in self.runs[knob]
                )
                return knob, f"--framework {self.name} ({self.label}) cannot run {flag} {shown}: it runs {runs}"
        for rule in self.rules:
            if rule.refuses(knobs):
                return rule.field, f"--framework {self.name} ({self.label}): {rule.reason}"
        return None
