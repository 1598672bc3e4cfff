"""How a framework's files are read (the second of Framework's three parts, planner.frameworks.base): the release
lines people run (Release: what each changed in defaults, keys and meanings) and how a run names one, the command lines
and configuration formats its folder's reader and writer own, and how a fork that froze a release shows itself."""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.errors import BadInput
from planner.frameworks.runs import Default
from planner.frameworks.tool import Signs, Tool

# what a release may change in the meaning of a framework's keys (Release.meaning), and the values each takes
MEANINGS = {
    # TRL's GRPO per_device_train_batch_size: completions (PR #2776, trl 0.15.0) or prompts, each sampling
    # num_generations completions (trl 0.14 and the Qwen2VLGRPOTrainer forks)
    "grpo_batch_counts": ("completions", "prompts"),
    # ms-swift's --max_length: the encoded row with its images' tokens (3.4 and later), or its text, the images'
    # tokens inserted after the check (2.x to 3.3): planner.frameworks.swift.RELEASES
    "swift_max_length_counts": ("images", "text"),
    # HF's --fsdp_config "version" (fsdp_version): read by TrainingArguments from transformers 5.0, FSDP2 where it
    # names none from 5.10.0 (5.10.0 training_args.py:2736 fsdp_config.get("version", 2); 5.10.4 the same), or "default
    # 1": read, FSDP1 where it names none, 5.0-5.9 (5.0.0 :2753, 5.9.0 :2812-2813 fsdp_config.get("version", 1)
    # handed to accelerate's plugin as fsdp_version, so the launch's FSDP_VERSION is not what decides), or ignored
    # (4.x: __post_init__ hands accelerate FSDP_* environment variables from fsdp_config and never FSDP_VERSION, 4.57.1
    # training_args.py:2003-2043, 4.53.0 the same, so accelerate's plugin is FSDP1 unless the launch sets
    # FSDP_VERSION=2, as memplan's HF command does: hf.launchenv, or `accelerate launch`'s own config names
    # fsdp_version 2)
    "fsdp_config_version": ("read", "ignored", "default 1"),
    # HF's --fsdp hybrid_shard (or _hybrid_shard_zero2) under FSDP2: refused from transformers 5.10.0 (5.10.0
    # training_args.py:2826-2840 "only available with FSDP1"; 5.10.4 the same), or "full": run as FSDP2's full shard
    # over every rank, 4.51 .. 5.9 (the strategy is FSDP1's alone: accelerate 1.10.1 utils/dataclasses.py:1775-1790,
    # 5.6.0 training_args.py:2794-2815 reshard_after_forward True; the replicate x shard mesh only from accelerate's
    # ParallelismConfig: planner.export.parallel)
    "fsdp2_hybrid": ("refused", "full"),
}


# the first line of the requirements.txt memplan writes beside a plan's files, `# PLANNED_FOR LABEL LINE`
# (planner.export.launch.pinned): read back (planner.intake.pins.planned_for), it names the framework a script whose
# flags name none was planned for (TRL's SFT runs the same TrainingArguments flags as HF's Trainer)
PLANNED_FOR = "memplan planned these files for"


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
    # the transformers the line is read at where its package is not transformers and takes one that reads a key
    # otherwise (TRL's: each line's venv, tools/fwenv_old.sh), said as assumed where the files pin none
    # (planner.intake.releases.transformers_read); "" where unsaid
    transformers: str = ""
    # the line's own rules (planner.frameworks.rules.Rule), after the framework's: a line whose writer writes no file
    # for some plans (scope "written") says so here, so the search never ranks them and readings still plan them
    rules: tuple = ()

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
class Reading:
    """How a framework's files are read and written, and its releases (Framework's fields that route a run to its
    folder and name the release it runs). `name` and `label` are Runs' (planner.frameworks.runs)."""

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
    # the python modules of its own that train nothing, each with what it runs (planner.intake.others: a script of
    # nothing else is refused in one line saying so; Tool.idle is a CLI's)
    idle_modules: tuple[tuple[str, str], ...] = ()
    # the command lines it owns (planner.frameworks.tool.Tool): its CLI's names and subcommands, the entry scripts and
    # modules a launcher runs in their place, the launcher it wraps and the reader a run of it goes to
    tools: tuple[Tool, ...] = ()
    # the script-flags trainers (the names its folder's reader.trainer_of gives a run: a transformers Trainer's or one
    # of TRL's) whose runs are this framework's; the first of the framework with `script_flags` is the plain Trainer's
    trainers: tuple[str, ...] = ()
    # its folder's reader reads a training script's own flags (TrainingArguments names: reader.trainer_of, read and
    # read_forks), where no CLI or config file claims the run (planner.intake.training, .pyscript); one framework
    script_flags: bool = False
    # a bare `python` run of it over several visible GPUs is HF's Trainer in one process, which wraps the model in
    # nn.DataParallel (planner.intake.world; transformers 4.40.2 trainer.py:1628-1629); its reader may decide by release
    one_process_dataparallel: bool = False
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
