"""The shape of a framework adapter: what it runs, its defaults, its keys, and the one-line refusal of a knob it
cannot run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

from planner.errors import BadInput
from planner.frameworks.rl import RoleEngine
from planner.frameworks.tool import Signs, Tool

# knobs no framework decides: the routing imbalance the plan assumes and the allocator's environment variable, and the
# framework's own name and release
NEUTRAL = ("expert_imbalance", "expandable_segments", "framework", "release")
# every knob and its declared default, in the declaration's order: planner.config.knobfields fills it when it is
# imported (the declaration stands above the frameworks, which name no knob list of their own)
KNOB_DEFAULTS: dict[str, object] = {}
PARALLEL = ("expert_parallel", "tensor_parallel", "sequence_parallel", "context_parallel", "device_map")


def _shown(value: object) -> str:
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else str(value)


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


# what a release may change in the meaning of a framework's keys (Release.meaning), and the values each takes
MEANINGS = {
    # TRL's GRPO per_device_train_batch_size: completions (PR #2776, trl 0.15.0) or prompts, each sampling
    # num_generations completions (trl 0.14 and the Qwen2VLGRPOTrainer forks)
    "grpo_batch_counts": ("completions", "prompts"),
    # ms-swift's --max_length: the encoded row with its images' tokens (3.4 and later), or its text, the images'
    # tokens inserted after the check (2.x to 3.3): planner.frameworks.swift.RELEASES
    "swift_max_length_counts": ("images", "text"),
}


@dataclass(frozen=True)
class Release:
    """One line of a framework's releases: the versions from `first` up to the next line's `first` (a fork that froze
    an early release: `first` None, named only), and what it changed against the framework's newest line: defaults
    and keys (memplan field -> Default / key; merged over the framework's), the GRPO/DPO workload's defaults, the
    meaning of keys (MEANINGS) and what the adapter runs (`adapter`: Framework fields replaced, e.g. sft_head).
    `source` names the tag or commit the line was read at; every Default cites its file:line there."""

    name: str  # what --framework NAME@RELEASE takes
    first: tuple[int, ...] | None
    source: str
    defaults: dict[str, Default] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    workload: dict[str, Default] = field(default_factory=dict)
    # a GRPO config's own defaults of the trainer's fields (trl 0.14's GRPOConfig set the batch): GRPO runs only
    grpo: dict[str, Default] = field(default_factory=dict)
    meaning: dict[str, str] = field(default_factory=dict)
    adapter: dict[str, object] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for what, value in self.meaning.items():
            assert value in MEANINGS[what], (self.name, what, value)

    def means(self, what: str) -> str:
        """The release's meaning of `what` (MEANINGS), the newest line's where it says nothing."""
        return self.meaning.get(what, MEANINGS[what][0])


def _meets(start: tuple, end: tuple | None, first: tuple | None, gone: tuple | None) -> bool:
    """[start, end) and [first, gone) share a version (None: open)."""
    return (first is None or end is None or first < end) and (gone is None or gone > start)


def version_of(text: str) -> tuple[int, ...] | None:
    """(0, 14, 2) from "0.14.2", "v0.14", "0.14.0.post1" or "1.0.0rc1" (the leading numbers); None when it has none."""
    parts = []
    for piece in text.strip().lstrip("vV").split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) < len(piece):
            break
    return tuple(parts) or None


@dataclass(frozen=True)
class ForkSigns:
    """How a run shows it is a fork that froze one of this framework's releases (planner.intake.releases reads it):
    `classes`, (trainer class in its script, release); `flags`, (a flag only the fork's script takes, release, why);
    `paths`, (a name in its files' paths, the releases it allows, the first planned), first match wins."""

    classes: tuple[tuple[str, str], ...] = ()
    flags: tuple[tuple[str, str, str], ...] = ()
    paths: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Framework:
    name: str
    label: str
    version: str  # the pinned version its defaults and keys were read from
    # closed by default: knob -> the values it runs; a knob in `every` runs every value; any other knob (a new one
    # too) only its declared default (planner.config.knobfields), until the framework's module says otherwise
    runs: dict[str, tuple]
    defaults: dict[str, Default] = field(default_factory=dict)
    every: tuple[str, ...] = ()  # the knobs it runs at every value the declaration allows
    keys: dict[str, str] = field(default_factory=dict)  # memplan field -> the framework's own key or flag
    notes: tuple[str, ...] = ()  # how it differs, one line each (the frameworks table)
    rules: tuple[Rule, ...] = ()  # combinations it refuses
    # how it spends memory apart from the recipe (the terms stay in planner.estimate): "recipe", the plan's --loss as
    # memplan runs it; "fused-logprob", TRL's fused log-prob head for SFT (no full logits, whatever the model);
    # "swift-sp", ms-swift's own per-token loss under sequence parallel (recipe_terms.swift_sp_loss_bytes)
    sft_head: str = "recipe"
    # how the transformers it runs calls SDPA in a Qwen2-VL tower (planner.estimate.vision.masked_tower_bytes):
    # "split", per image or window, or with 4-D tensors a fused kernel takes (nothing grows with the square of the
    # patches); "masked-3d", transformers 4.45-4.50's Qwen2-VL and Qwen2.5-VL towers (a [1, N, N] mask over every
    # patch of the call and 3-D q/k/v, which the fused kernels refuse: torch's math backend computes every head's
    # N x N scores)
    tower_sdpa: str = "split"
    # the dtype of the logits a causal LM's forward returns in training (what torch's nn.DataParallel gathers onto
    # GPU 0: planner.estimate.dataparallel): "compute", the model's (transformers 4.46.0 modeling_llama.py:1210-1214,
    # the upcast moved into loss_utils.py:36); "fp32", transformers through 4.45 (4.40.2 modeling_llama.py:1231,
    # 4.45.2 :1214-1219: logits.float() in the forward)
    returned_logits: str = "compute"
    # how its GRPO scores a multimodal model's tokens (planner.estimate.recipe_terms.whole_logits_logps_bytes): "recipe",
    # as --logprobs says; "whole", ms-swift 3.2-3.6's: the model's logits over every token of the rows (no
    # logits_to_keep for a multimodal model), the completion's slice divided by the temperature, then TRL's
    # selective_log_softmax row by row (v3.4.1 swift/trainers/rlhf_trainer/grpo_trainer.py:1181-1197)
    vlm_logprobs: str = "recipe"
    # what shrinks a vision tower's call, in its own words (planner.search.advice.tower_fix): an image's pixel cap, and
    # InternVL's tiles an image; "" where it has no word of its own (memplan's --image-tokens is named)
    image_knobs: tuple[str, str] = ("", "")
    # GKD's JSD (planner.estimate.gkd): "whole", TRL's generalized_jsd_loss over every token's logits; "chunked",
    # ms-swift's over the completion's, 512 tokens a chunk; "" where it does not run --workload gkd
    gkd_loss: str = ""
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
    # an RL run planned by its roles (planner.estimate.roles) and how they spend memory; None: GRPO and DPO as one
    # trainer (planner.estimate.rl)
    role_engine: RoleEngine | None = None
    # the weight sync to a vLLM server gathers the model in groups of layers (ms-swift's --move_model_batches,
    # planner.estimate.weight_sync), else parameter by parameter
    sync_groups: bool = False
    # PEFT's all-linear adapts a VLM's tower and projector too (planner.intake.settle); False where the framework's
    # own all-linear leaves them out
    all_linear_vision: bool = True
    # what a config of this framework read alone supplies to the run another file leads (planner.intake.dispatch):
    # "ds-json" a DeepSpeed JSON, "launcher-yaml" a launcher's YAML; "" the run's own trainer, which leads
    supporting: str = ""
    # the words its deepspeed setting takes for a config it bundles (planner.frameworks.deepspeed.reader.preset: the file
    # presets/<name>_<word>.json)
    deepspeed_words: tuple[str, ...] = ()
    # the lines of releases people run, oldest first, then the forks; the line with the highest `first` is the newest
    # (the one `version` names), whose defaults and keys are this adapter's own. Adding a release is one Release in
    # the framework's module.
    releases: tuple[Release, ...] = ()
    # the flags only some releases take, by trainer ("sft", "grpo"): flag -> (the first version taking it, the first
    # no longer taking it; None: open). A run's flags narrow the releases its files allow (planner.intake.releases)
    key_spans: dict[str, dict[str, tuple]] = field(default_factory=dict)
    # another framework's release under a name of its own (trl-0: "trl@0.22"), "" for none
    same_as: str = ""
    # its folder has a writer (planner/frameworks/<name>/writer.py: files(plan, model, hw, seq_len) and command(plan,
    # hw)), which planner.export.launch dispatches a plan of this framework to; False: HF's material
    writes: bool = False
    # how a configuration file in one of its formats is told from its content (planner.intake.configs.kind)
    signs: tuple[Signs, ...] = ()
    # the configuration formats its folder's reader reads (its signs' formats): planner.intake
    # dispatches such a file to planner/frameworks/<name>/reader.py read_file(c, data, path, *, flags, words, trainer,
    # vars) (flags: the command line's; words: its positional words after the file)
    reads: tuple[str, ...] = ()
    # the python modules (`python -m M`) whose runs its folder's reader reads whole: planner.intake dispatches them to
    # planner/frameworks/<name>/reader.py read_launched(c, run) (an RL trainer that places its own roles)
    launched: tuple[str, ...] = ()
    # the command lines it owns (planner.frameworks.tool.Tool): its CLI's names and subcommands, the entry scripts and
    # modules a launcher runs in their place, the launcher it wraps and the reader a run of it goes to
    tools: tuple[Tool, ...] = ()
    # the script-flags trainers (the names its folder's reader.trainer_of gives a run: a transformers Trainer's or one
    # of TRL's) whose runs are this framework's; the first of the framework with `script_flags` is the plain Trainer's
    trainers: tuple[str, ...] = ()
    # its folder's reader reads a training script's own flags (TrainingArguments names: reader.trainer_of, read and
    # read_forks), where no CLI or config file claims the run (planner.intake.training, .pyscript); one framework
    script_flags: bool = False
    # the module of its folder that reads a Python script's calls of a library built on it (planner.intake.pyscript:
    # Seen, is_unsloth, take, flags, release, read), "" for none
    calls: str = ""
    # the package whose pinned version beside a run decides its release (planner.intake.releases), "" for none; and
    # its older names, pinned the same way (LLaMA-Factory's llmtuner)
    package: str = ""
    package_aliases: tuple[str, ...] = ()
    # its own entry points: (the launcher tool or the path the launched script's path ends with, the release lines
    # that ship it), first match wins; a run of one with a word of `vocabulary` among its flags is read by its reader
    # (planner.intake.training), and the entry point narrows the release (planner.intake.releases.for_entry)
    entry_points: tuple[tuple[str, tuple[str, ...]], ...] = ()
    vocabulary: tuple[str, ...] = ()
    # the log-prob head its DPO and GRPO trainers run where a request names none (planner.config.release): TRL's
    # fused head, or "full", the whole logits
    logprobs: str = "fused"
    # the forks that froze one of its releases, known by their trainer classes, flags and files; None for none
    forks: ForkSigns | None = None

    @property
    def newest(self) -> Release | None:
        return max((r for r in self.releases if r.first is not None), key=lambda r: r.first, default=None)

    def line(self, text: str = "") -> str:
        """The release line's name `text` names, "" for the newest (the name a plan carries)."""
        r = self.release(text)
        return "" if r is None or r is self.newest else r.name

    def release(self, text: str = "") -> Release | None:
        """The release line `text` names: its name or an alias, or a version inside a line ("0.14.2"); "" the newest.
        BadInput naming what is accepted for anything else."""
        shown = text if text.isprintable() else repr(text)[1:-1]  # a one-line error, whatever the text holds
        if not self.releases:
            if text:
                raise BadInput(
                    f"--framework {self.name}@{shown}: {self.label} lists no releases (give --framework {self.name})",
                    "framework",
                )
            return None
        if not text:
            return self.newest
        for r in self.releases:
            if text == r.name or text in r.aliases:
                return r
        version = version_of(text) if text[:1].isdigit() or text[:1] in "vV" else None
        lines = [r for r in self.releases if r.first is not None and version is not None and r.first <= version]
        if lines:
            return max(lines, key=lambda r: r.first)
        raise BadInput(
            f"--framework {self.name}@{shown}: {self.label} has no release {text!r}; it takes {self.accepted()}",
            "framework",
        )

    def lines_taking(self, trainer: str, flags) -> tuple[Release, ...]:
        """The release lines (oldest first) whose versions take every flag in `flags` that key_spans[trainer] lists: a
        line [first, the next line's first) meets each flag's span [first taking it, first not)."""
        lines = sorted((r for r in self.releases if r.first is not None), key=lambda r: r.first)
        spans = [self.key_spans.get(trainer, {}).get(f) for f in flags]
        out = []
        for i, r in enumerate(lines):
            end = lines[i + 1].first if i + 1 < len(lines) else None
            if all(s is None or _meets(r.first, end, *s) for s in spans):
                out.append(r)
        return tuple(out)

    def accepted(self) -> str:
        """The releases as --framework NAME@RELEASE takes them (a version inside a line too)."""
        names = [r.name + (f" ({', '.join(r.aliases)})" if r.aliases else "") for r in self.releases]
        lowest = min((r.first for r in self.releases if r.first is not None), default=None)
        versions = f", or a version from {'.'.join(map(str, lowest))}" if lowest else ""
        return f"{', '.join(names)}{versions}"

    def at(self, text: str = "") -> Framework:
        """This adapter as the release `text` runs it: its defaults and keys merged over the newest's, `adapter`
        fields replaced (planner.frameworks.adapter caches it)."""
        r = self.release(text)
        if r is None or r is self.newest:
            return self
        return replace(
            self,
            defaults={**self.defaults, **r.defaults},
            keys={**self.keys, **r.keys},
            notes=self.notes + r.notes,
            **r.adapter,
        )

    def precision(self, bf16: bool) -> str:
        """The precision a request that names none runs: bf16 (fp16 where the GPU has no bf16) where this framework
        runs it, else its declared default, else the first it runs (torchtune runs bf16-pure or fp32 alone)."""
        wanted = "bf16" if bf16 else "fp16"
        runs = self.runs.get("precision")
        if not runs or wanted in runs:
            return wanted
        declared = self.defaults.get("precision")
        usable = [p for p in runs if bf16 or "bf16" not in p]
        if declared is not None and declared.value in usable:
            return declared.value
        return (usable or list(runs))[0]

    def value_of(self, knob: str, value: object) -> object:
        """The value as `runs` names it: workloads by kind, LoRA and the parallel sizes as on/off."""
        if knob == "workload":
            return kind({"workload": value})
        if knob == "lora_rank" or knob in PARALLEL:
            return "off" if value in (0, 1) else "on"
        return value

    @cached_property
    def _checked(self) -> tuple[tuple[str, tuple], ...]:
        """(knob, the values it runs) for each knob `cannot` checks, the workload first, then in the declaration's
        order: computed once per adapter (a search asks for every knob family)."""
        order = ("workload", *(k for k in KNOB_DEFAULTS if k != "workload"))
        return tuple(
            (k, self.runs.get(k) or (self.value_of(k, KNOB_DEFAULTS[k]),))
            for k in order
            if k not in NEUTRAL and k not in self.every
        )

    def cannot(self, knobs: dict) -> tuple[str, str] | None:
        """(field, one-line reason) for the first knob this framework cannot run (the workload first, then in the
        declaration's order), else None."""
        for knob, runs in self._checked:
            if knob not in knobs:
                continue
            value = self.value_of(knob, knobs[knob])
            if value not in runs:
                flag = "--" + ("zero" if knob == "zero_stage" else knob.replace("_", "-"))
                return knob, f"--framework {self.name} ({self.label}) cannot run {flag} {_shown(value)}: it runs " + (
                    ", ".join(_shown(v) for v in runs) if knob in self.runs else f"only the default, {_shown(runs[0])}"
                )
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
