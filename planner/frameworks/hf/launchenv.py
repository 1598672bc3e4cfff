"""The environment that makes an FSDP plan written as HF's command (TrainingArguments' --fsdp and --fsdp_config, for
HF's Trainer and TRL's) run FSDP2 at every release, and read back by accelerate.reader.read_env_version. transformers 4.53.0 and 4.57.1 training_args.py
:1982-2022 set ACCELERATE_USE_FSDP and FSDP_* from --fsdp and --fsdp_config but never FSDP_VERSION (Release.means
fsdp_config_version "ignored": reading.MEANINGS), and the plugin the Trainer's Accelerator builds takes its version from
that variable, 1 where unset (accelerate 1.8.1 utils/dataclasses.py:1707-1708; 1.10.1 the same), its
reshard_after_forward under FSDP2 only from FSDP_RESHARD_AFTER_FORWARD, true where unset (:1733-1738; the
FSDP_SHARDING_STRATEGY transformers sets is read under FSDP1 alone, :1721-1723); the Trainer then runs FSDP2 (4.53.0
trainer.py:2303 is_fsdp2). TRL's 0.22 and 1.0 lines run on transformers 4.56.2 too (trl v0.29.1 and v1.0.0
pyproject.toml:35 transformers>=4.56.2), whose TrainingArguments drop the key the same way; from transformers 5 the key
is handed to the plugin as an argument (5.6.0 training_args.py:2809-2810), which the variable then agrees with. So the
command and the Slurm script of every such plan export them (planner.export.export.launch_env), as `accelerate launch`
does from its config's fsdp_version (accelerate 1.8.1 utils/launch.py:309)."""

from __future__ import annotations

from planner.frameworks import FRAMEWORKS
from planner.frameworks.peft import VERSIONS

VERSION = "FSDP_VERSION"  # read back by accelerate.reader.read_env_version (a writer imports no reader)
RESHARD = "FSDP_RESHARD_AFTER_FORWARD"


def fsdp_env(plan) -> dict[str, str]:
    """{variable: value} that makes the plan's FSDP2 run at any release its line allows: empty for a plan that does
    not shard with FSDP, or whose framework writes its own files (Framework.writes: its accelerate config names
    fsdp_version 2)."""
    fw = FRAMEWORKS.get(plan.framework)
    if plan.fsdp == "off" or (fw is not None and fw.writes):
        return {}
    return {VERSION: "2", **({RESHARD: "false"} if plan.fsdp == "grad-op" else {})}


# HF's Trainer runs accelerate's FSDP2 from transformers 4.51.0 (trainer.py:2317 is_fsdp2; none at 4.49.0 or 4.50.0),
# accelerate has it from 1.6.0 (v1.5.0 utils/dataclasses.py has no fsdp_version): a pin of the hf 4 line (4.0 .. 4.53)
# starts there for an FSDP plan, and every such plan pins that accelerate (TRL names lower bounds only)
TRAINER_FSDP2 = (4, 51)
ACCELERATE_FSDP2 = "accelerate>=1.6.0"


# a sequence- or context-parallel plan's train_args.json carries TrainingArguments.parallelism_config, a field from
# transformers 4.56 (4.56.2 training_args.py:1279; 4.54.1 and 4.55.4 HfArgumentParser.parse_dict refuse the file:
# "Some keys are not used by the HfArgumentParser: ['parallelism_config']"), the release whose Trainer splits the
# batch for context parallel (4.56.2 trainer.py:3869-3935, 3995 _prepare_context_parallel_inputs; none at 4.55.4)
TRAINER_PARALLELISM = (4, 56)


def splits_sequence(plan) -> bool:
    """A plan written with TrainingArguments.parallelism_config (planner.export.parallel.parallelism_fields)."""
    return plan.sequence_parallel > 1 or plan.context_parallel > 1


def pinned_first(plan, package: str, first: tuple[int, ...]) -> tuple[int, ...]:
    """The first version of `package` the pin of the plan's line names: transformers 4.56 for a sequence- or
    context-parallel plan, 4.51 for an FSDP plan (fsdp_env's plans) of a line starting before it, else the line's
    own first."""
    if package == "transformers" and splits_sequence(plan):
        return max(first, TRAINER_PARALLELISM)
    if package == "transformers" and fsdp_env(plan) and first < TRAINER_FSDP2:
        return TRAINER_FSDP2
    return first


# an HSDP or context-parallel plan's mesh comes from accelerate's ParallelismConfig, which the Accelerator builds from the
# variables from 1.10 (planner.export.parallel.hsdp_fields; transformers asks 1.10.1 of it, 4.56.2
# trainer.py:5468-5471)
ACCELERATE_HSDP = "accelerate>=1.10.1"


# TRL's pin names TRL: a line whose TRL takes a transformers before 4.56 (trl 0.22.2 METADATA Requires-Dist
# transformers>=4.55.0) gets the transformers a sequence- or context-parallel plan's file needs as its own line
TRANSFORMERS_PARALLELISM = "transformers>=4.56.0"


def requirements(plan) -> str:
    """The requirement lines beside the package's pin: accelerate's FSDP2 for the plans fsdp_env names, its
    ParallelismConfig for an HSDP or context-parallel plan, transformers 4.56 for a sequence- or context-parallel
    plan of a framework whose pin names another package (TRL), and the PEFT a LoRA plan's --peft-release names."""
    fw = FRAMEWORKS.get(plan.framework)
    lines = (
        [TRANSFORMERS_PARALLELISM] if splits_sequence(plan) and fw is not None and fw.package != "transformers" else []
    )
    if fsdp_env(plan):
        mesh = plan.fsdp == "hybrid" or plan.context_parallel > 1
        lines.append(ACCELERATE_HSDP if mesh else ACCELERATE_FSDP2)
    if plan.lora_rank and plan.peft_release in VERSIONS:  # the PEFT the plan was made for (--peft-release)
        lines.append("peft==" + ".".join(map(str, VERSIONS[plan.peft_release])))
    return "".join(f"{line}\n" for line in lines)
