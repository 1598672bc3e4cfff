"""The training frameworks memplan knows and does not read, and how a launch script or a Python file shows one: its
CLI (`megatron sft`, `xtuner train`, `nemo llm finetune`), the entry scripts and `python -m` modules a launcher runs,
the flags only it takes, the packages a Python file imports from. planner.intake.others refuses a script that runs
one in a line naming it (and notes one it skips beside a run memplan reads), so that none is planned with another
trainer's defaults. Inference engines that train nothing (`vllm serve`) are listed too, with what they run.
Each entry cites where its names were read."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Unread:
    """One framework (or engine) memplan does not read. `name` and `what`: how a refusal names it; `clis`: the
    executables a launch line names it by; `trains`: their subcommands that train (empty: every one), the others said
    as `idle`, each with what it runs; `scripts`: a pattern on a script a launcher runs; `modules`: `python -m` module
    prefixes; `flags`: flags as written on a command line that only it takes; `vocabulary`: flags as written
    of which two together are its (each alone might be another script's own); `imports`: a pattern on the modules a
    Python file imports; `runs`: what an engine that trains nothing runs ("" for a trainer)."""

    name: str
    what: str
    source: str
    clis: tuple[str, ...] = ()
    trains: tuple[str, ...] = ()
    idle: tuple[tuple[str, str], ...] = ()
    scripts: str = ""
    modules: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    vocabulary: tuple[str, ...] = ()
    imports: str = ""
    runs: str = ""

    def by_script(self, target: str) -> bool:
        return bool(self.scripts) and re.search(self.scripts, target) is not None

    def by_module(self, module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in self.modules)

    def by_import(self, module: str) -> bool:
        return bool(self.imports) and re.match(self.imports, module) is not None


UNREAD: tuple[Unread, ...] = (
    Unread(
        "Megatron-SWIFT",
        "ms-swift's Megatron-Core trainer (the `megatron` console script)",
        "ms-swift v4.5.2 setup.py:163, swift/cli/_megatron/main.py:6-11",
        clis=("megatron",),
        trains=("sft", "pt", "rlhf"),
        idle=(("export", "a checkpoint conversion between Hugging Face and Megatron-Core"),),
        scripts=r"swift/cli/_megatron/(sft|pt|rlhf)\.py$",
        modules=("swift.cli._megatron", "swift.megatron"),
        imports=r"swift\.megatron(\.|$)",
    ),
    Unread(
        "Megatron-LM",
        "NVIDIA's Megatron-Core trainer (its pretrain_*.py scripts, megatron.training)",
        "Megatron-LM core_v0.15.0 pretrain_*.py; megatron/training/arguments.py:2561 --tensor-model-parallel-size, "
        "1549-1585 --num-layers .. --max-position-embeddings, 1974-1981 and 2137 the batch and iterations, 2850 --seq-length",
        scripts=r"(^|/)pretrain_(gpt|bert|t5|vlm|mamba|hybrid|retro|ict|vision_\w+)\.py$",
        modules=("megatron.training",),
        flags=("--tensor-model-parallel-size", "--pipeline-model-parallel-size"),
        vocabulary=(
            "--num-layers",
            "--hidden-size",
            "--num-attention-heads",
            "--max-position-embeddings",
            "--micro-batch-size",
            "--global-batch-size",
            "--train-iters",
            "--seq-length",
        ),
        imports=r"megatron\.(training|legacy)(\.|$)",
    ),
    Unread(
        "Megatron-Bridge",
        "NVIDIA's Hugging Face to Megatron-Core bridge and its training recipes",
        "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/ (the megatron.bridge package), scripts/training/run_recipe.py",
        scripts=r"(^|/)scripts/training/(run_recipe|finetune_decoder|performance_recipe)\.py$",
        modules=("megatron.bridge",),
        imports=r"megatron\.bridge(\.|$)",
    ),
    Unread(
        "NeMo",
        "NVIDIA's NeMo framework (`nemo llm finetune`, its megatron_*.py examples)",
        "NeMo v2.4.0 setup.py:304-307 (nemo_run's `nemo` CLI, `llm = nemo.collections.llm`); "
        "examples/nlp/language_modeling/tuning/megatron_gpt_finetuning.py",
        clis=("nemo",),
        scripts=r"(^|/)megatron_\w*(pretraining|finetuning|sft|distillation|qat)\.py$",
        modules=("nemo",),
        imports=r"nemo(\.|$)",
    ),
    Unread(
        "xtuner",
        "InternLM's trainer (`xtuner train CONFIG`, an mmengine config)",
        "xtuner v0.2.0 setup.py:138 (console script xtuner), xtuner/entry_point.py:13-21",
        clis=("xtuner",),
        modules=("xtuner",),
        imports=r"xtuner(\.|$)",
    ),
    Unread(
        "vLLM",
        "an inference engine",
        "vllm's console script (`vllm serve MODEL`)",
        clis=("vllm",),
        modules=("vllm.entrypoints",),
        runs="an inference server",
    ),
)
# the executables a launch line names an unread framework by
CLI_NAMES: dict[str, Unread] = {n: u for u in UNREAD for n in u.clis}


def by_cli(name: str) -> Unread | None:
    return CLI_NAMES.get(name)


def by_run(target: str, module: bool, words: list[str]) -> Unread | None:
    """The unread framework a launcher's run is (its script, `python -m` module, or a flag only it takes), else None.
    A script is looked for among the words too: behind a launcher's options the script cannot expand (`torchrun
    ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py`, Megatron-LM's examples) the target is the unknown word before it."""
    scripts = [w for w in (target, *words) if w.endswith(".py")] if not module else []
    for u in UNREAD:
        if (module and u.by_module(target)) or any(u.by_script(w) for w in scripts):
            return u
        written = {w.split("=")[0] for w in words}
        if written & set(u.flags) or len(written & set(u.vocabulary)) >= 2:
            return u
    return None


def by_imports(modules: list[str]) -> Unread | None:
    """The unread framework a Python file imports from, else None."""
    return next((u for u in UNREAD for m in modules if u.by_import(m)), None)
