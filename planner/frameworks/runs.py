"""What a framework runs (the first of Framework's three parts, planner.frameworks.base): its name and version, the
values of each knob it runs (closed by default), its defaults with the file each was read from, its keys, its rules,
and the one-line refusal of a knob or combination it cannot run."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from planner.frameworks.rules import Rule, Where, kind

# knobs no framework decides: the routing imbalance the plan assumes and the allocator's environment variable, the
# framework's own name and release, and the PEFT release under it (a pin beside the files; requirements.txt writes it)
NEUTRAL = ("expert_imbalance", "expandable_segments", "framework", "release", "peft_release")
# every knob and its declared default, in the declaration's order: planner.config.knobfields fills it when it is
# imported (the declaration stands above the frameworks, which name no knob list of their own)
KNOB_DEFAULTS: dict[str, object] = {}
# why a framework's DPO refuses what Runs.dpo_runs does not list, where its module says no more
DPO_WHY = {
    "packed": "its DPO runs chosen and rejected rows padded",
    "sequence_parallel": "its DPO keeps every row whole on each rank (no sequence parallel)",
}
# KTO's, where a framework's module says no more: its rows and their KL rows (each prompt with its neighbour's
# completion) padded, whole on each rank
KTO_WHY = {
    "packed": "its KTO runs its rows and their KL rows padded",
    "sequence_parallel": "its KTO keeps every row whole on each rank (no sequence parallel)",
}
GRPO_SP_WHY = "its GRPO keeps every completion whole on each rank (no sequence parallel)"
# the RL runs without a critic, whose roles split under Ulysses as GRPO's do (Framework.grpo_sp: verl's actor and
# reference; the same roles for rloo and reinforce++: verl 0.9.1 trainer/ppo/utils.py:96-107 need_critic)
CRITIC_FREE = ("grpo", "rloo", "reinforce++")
# torch's optimizers and bitsandbytes', which every framework on transformers' Trainer runs; GaLore, APOLLO and Muon
# (planner.estimate.matrix_optim) are listed by the frameworks that run them, in their own folders
TORCH_OPTIMIZERS = ("adamw", "adamw-fused", "sgd", "adafactor", "adamw-8bit", "paged-adamw", "paged-adamw-8bit")
# transformers' optim galore_adamw, galore_adamw_8bit and apollo_adamw (transformers 5.25 trainer_optimizer.py:351-410),
# which its Trainer, TRL's and axolotl's run (its optim_target_modules and optim_args rank)
TRANSFORMERS_LOW_RANK = ("galore-adamw", "galore-adamw-8bit", "apollo-adamw")
# transformers' optim adamw_torch_4bit (since 4.45.0) and adamw_torch_8bit (since 4.49.0): torchao's AdamW4bit and
# AdamW8bit (planner.estimate.torchao_optim), which its Trainer and every framework passing its optim names run
TRANSFORMERS_TORCHAO = ("adamw-torchao-4bit", "adamw-torchao-8bit")
# transformers' optim lion_32bit, lion_8bit, their paged_ ones, rmsprop_bnb(_8bit) and torch's rmsprop and adagrad
# (trainer_optimizer.py:246-349), which its Trainer and every framework passing its optim names run
TRANSFORMERS_ONE_STATE = (
    "lion",
    "lion-8bit",
    "paged-lion",
    "paged-lion-8bit",
    "rmsprop",
    "rmsprop-bnb",
    "rmsprop-bnb-8bit",
    "adagrad",
)
PARALLEL = ("expert_parallel", "tensor_parallel", "sequence_parallel", "context_parallel", "device_map")


def _shown(value: object) -> str:
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Default:
    """A framework's default for a memplan field, and where it was read (file:line at the pinned version)."""

    value: object
    source: str


@dataclass(frozen=True)
class Runs:
    """What a framework runs, its defaults, keys and rules (Framework's fields that decide what it refuses)."""

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
    # closed by default: what its DPO runs beyond padded rows on one rank, each with where it was read ("packed":
    # padding-free rows, "sequence_parallel": the pair's rows split over ranks); a DPO plan with either refuses else,
    # saying `dpo_why`'s line for it (where the framework's own source says so), DPO_WHY's where it says none
    dpo_runs: dict[str, str] = field(default_factory=dict)
    dpo_why: dict[str, str] = field(default_factory=dict)
    # the same for its KTO: the rows and the KL batch's rows packed (each batch one row), or split over ranks
    kto_runs: dict[str, str] = field(default_factory=dict)
    kto_why: dict[str, str] = field(default_factory=dict)
    # its GRPO (one trainer, planner.estimate.rl) under Ulysses sequence parallel, with where it was read; "" refuses
    # it, saying `grpo_sp_why` (GRPO_SP_WHY where its module says no more)
    grpo_sp: str = ""
    grpo_sp_why: str = ""
    # where its collator pads each micro-batch to that batch's longest row, not to the length the files set, which is
    # then a cap (rows shorter cost less: check --config says the longest rows that fit where the cap does not);
    # "" where every row costs the length (padded to it) or the user's own script decides
    pads_per_batch: str = ""
    # the multiple of tokens that collator pads a micro-batch's longest row up to (pad_to_multiple_of): a row of n
    # tokens costs n rounded up to it, so the longest rows that fit are a multiple of it
    pad_multiple: int = 1

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
        dpo = self.dpo_refusal(knobs)
        if dpo is not None:
            return dpo
        for rule in self.rules:
            if rule.scope == "knobs" and rule.refuses(knobs):
                return rule.field, f"--framework {self.name} ({self.label}): {rule.reason}"
        return None

    def dpo_refusal(self, knobs: dict) -> tuple[str, str] | None:
        """(field, one line) where a DPO or KTO plan packs its rows or splits them over ranks and this framework's DPO
        or KTO (at this release line) does not (`dpo_runs`, `kto_runs`), or a GRPO plan splits them and its GRPO does
        not (`grpo_sp`), else None."""
        workload = kind(knobs)
        if workload in CRITIC_FREE and knobs.get("sequence_parallel", 1) > 1 and not self.grpo_sp:
            why = self.grpo_sp_why or GRPO_SP_WHY
            said = f"--framework {self.name} ({self.label}) cannot run --sequence-parallel with --workload {workload}"
            return "sequence_parallel", f"{said}: {why}"
        if workload not in ("dpo", "kto"):
            return None
        runs = self.dpo_runs if workload == "dpo" else self.kto_runs
        asked = (
            ("batching", "packed", "--batching packed", knobs.get("batching") == "packed"),
            ("sequence_parallel", "sequence_parallel", "--sequence-parallel", knobs.get("sequence_parallel", 1) > 1),
        )
        for knob, key, flag, given in asked:
            if given and key not in runs:
                why = self.why_not(key, workload)
                return (
                    knob,
                    f"--framework {self.name} ({self.label}) cannot run {flag} with --workload {workload}: {why}",
                )
        return None

    def why_not(self, key: str, workload: str = "dpo") -> str:
        """The line saying why this framework's DPO (or KTO) does not run `key` ("packed", "sequence_parallel")."""
        if workload == "kto":
            return self.kto_why.get(key, KTO_WHY[key])
        return self.dpo_why.get(key, DPO_WHY[key])

    def cannot_here(self, knobs: dict, where: Where) -> tuple[str, str] | None:
        """(field, one-line reason) for the first layout rule (and, with the split in `where`, split rule) this
        framework refuses on these GPUs, this model and these samples, else None."""
        scopes = ("layout", "split") if where.micro_batch is not None else ("layout",)
        for rule in self.rules:
            if rule.scope in scopes and rule.refuses(knobs, where):
                return rule.field, f"--framework {self.name} ({self.label}): {rule.says(knobs, where)}"
        return None

    def unwritten(self, knobs: dict, where: Where) -> tuple[str, str] | None:
        """(field, one-line reason) for the first rule of scope "written" these knobs break: a plan this framework (at
        this release line) runs and its files are read, but its writer writes no file for. The search prunes with it
        (planner.search.search.families); a reading of a user's file and check's request never trip it."""
        for rule in self.rules:
            if rule.scope == "written" and rule.refuses(knobs, where):
                return rule.field, f"--framework {self.name} ({self.label}): {rule.reason}"
        return None

    def refusal(self, knobs: dict, where: Where) -> tuple[str, str] | None:
        """Every rule of this framework, the knobs' first: what its exporter checks before writing a file."""
        return self.cannot(knobs) or self.cannot_here(knobs, where) or self.unwritten(knobs, where)
