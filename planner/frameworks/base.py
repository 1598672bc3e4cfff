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
    knob family with it), "split" the same once the micro-batch and accumulation are known (a candidate)."""

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
            if rule.scope == "knobs" and rule.refuses(knobs):
                return rule.field, f"--framework {self.name} ({self.label}): {rule.reason}"
        return None

    def cannot_here(self, knobs: dict, where: Where) -> tuple[str, str] | None:
        """(field, one-line reason) for the first layout rule (and, with the split in `where`, split rule) this
        framework refuses on these GPUs, this model and these samples, else None."""
        scopes = ("layout", "split") if where.micro_batch is not None else ("layout",)
        for rule in self.rules:
            if rule.scope in scopes and rule.refuses(knobs, where):
                return rule.field, f"--framework {self.name} ({self.label}): {rule.says(knobs, where)}"
        return None

    def refusal(self, knobs: dict, where: Where) -> tuple[str, str] | None:
        """Every rule of this framework, the knobs' first: what its exporter checks before writing a file."""
        return self.cannot(knobs) or self.cannot_here(knobs, where)
