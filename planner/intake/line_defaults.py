"""The defaults of the release line a reading targets (the fact "release", planner.intake.releases), where that line
moved them against the framework's newest (Release.defaults): filled for HF's trainers and TRL (release_defaults),
looked up key by key (moved_default) or laid under a reader's flags (with_defaults); a default the line did not
move, cited at the newest, said as the line's (restate)."""

from __future__ import annotations

import re

from planner.frameworks import ARGS, FRAMEWORKS, by_trainer
from planner.intake.collect import Collector, default, is_default
from planner.intake.flags import Flag
from planner.intake.releases import given


def release_defaults(c: Collector, trainer: str) -> None:
    """The defaults of the release the files show (planner.intake.releases), where it differs from the newest:
    checkpointing, optimizer, micro-batch, accumulation; a GRPO release's beta and max_completion_length; and the
    line that says a GRPO batch counts prompts (trl 0.14 and the Qwen2VLGRPOTrainer forks)."""
    release, why, _ = c.facts.get("release", ("", "", ""))
    name = by_trainer(trainer)
    if not release or c.framework != name:
        return
    r = FRAMEWORKS[name].release(release)
    who = f"{name}@{r.name}"
    mine = given(name)
    tail = f" ({mine[1]})" if mine is not None else ""  # the release given beside the files, named

    def source(d) -> str:
        return default(who, d.source) + tail

    grpo = r.grpo if trainer == "grpo" else {}
    for field, d in {**r.defaults, **grpo}.items():
        if field in ("checkpointing", "optimizer", "micro_batch", "grad_accum"):
            c.fill(field, d.value, source(d), FRAMEWORKS[ARGS].keys.get(field, field))
    if "precision" in r.defaults:  # the trainer's mixed precision where the files set none
        c.fact("amp", r.defaults["precision"].value, source(r.defaults["precision"]), "bf16", weak=True)
    if trainer == "dpo" and "logprobs" in r.workload:  # DPO's log-prob head at that release
        c.fill("workload.logprobs", r.workload["logprobs"].value, source(r.workload["logprobs"]), "trainer")
    if trainer != "grpo":
        return
    for field, d in r.workload.items():
        if field != "generation":
            c.fill(f"workload.{field}", d.value, source(d), field)
    gen, mode = c.setting("workload.generation"), r.workload.get("generation")
    vllm = mode is not None and gen is not None and "use_vllm" in c.facts and str(gen.value).startswith("vllm")
    if vllm and is_default(gen.source):
        said = c.facts["use_vllm"][1]  # the flag that turned vLLM on (planner.frameworks.trl.reader_grpo)
        c.set("workload.generation", mode.value, f"{said}; {source(mode)}", gen.key)  # its mode the release's
        util = c.setting("workload.vllm_gpu_memory_utilization")
        if util is not None:  # it sizes vLLM on its own GPUs there, none of the training GPUs' memory
            c.drop("workload.vllm_gpu_memory_utilization")
            c.note(f"{util.source} (vLLM's share of its own GPUs under {who}: not planned, training GPUs hold no vLLM)")
    if r.means("grpo_batch_counts") == "prompts":
        mb = c.setting("micro_batch")
        n = c.get("workload.num_generations", 8)
        c.note(
            f"{mb.source if mb else 'per_device_train_batch_size'} ({who} counts it in prompts, {n} completions each: "
            f"planned as {int(c.get('micro_batch', 1)) * int(n)} completions a micro-batch; {why})"
        )


def as_at(line: str | None, source: str) -> str:
    """A newest release's default `source` (`trl 1.16 default max_length 1024 (file:line)`) read at an older `line`:
    `trl@0.22 default, as at trl 1.16: max_length 1024 (file:line)` (the guards: tests/planner/frameworks/*/
    test_line_defaults.py compare each line's filled defaults with its own release's config classes)."""
    if line is None:
        return source
    who, _, rest = source.partition(" default")
    return f"{line} default, as at {who}:{rest}"


def restate(c: Collector) -> None:
    """Where the reading targets an older line of its framework, each source citing a default at a release of the
    framework's package (Framework.version's: `llamafactory 0.9.5 default`, OpenRLHF's flat SFT `openrlhf 0.5.7
    default`) read at that line (as_at: `llamafactory@0.8 default, as at llamafactory 0.9.5: cutoff_len ...`), as
    HF's and TRL's readers fill theirs (planner.frameworks.hf.reader.defaults); the last step of settle.finish. The
    guards: tests/planner/frameworks/{llamafactory,swift,openrlhf}/test_line_defaults.py."""
    fw = FRAMEWORKS.get(c.framework)
    r = line_read(c, c.framework) if fw is not None and fw.releases else None
    if r is None:
        return
    # the framework's package and transformers (HF's Trainer's defaults the readers of TRL, LLaMA-Factory, ms-swift and
    # DeepSpeed JSONs cite at transformers' newest)
    packages = {fw.version.rpartition(" ")[0], "transformers"}
    head = re.compile(rf"\b(?:{'|'.join(map(re.escape, sorted(packages)))}) [\d.]+ default\b")
    c.restate(lambda source: head.sub(lambda m: as_at(f"{c.framework}@{r.name}", m.group(0)), source))


def line_read(c: Collector, framework: str):
    """The release line the reading targets (the fact "release") where it is not the framework's newest, else None."""
    fw, release = FRAMEWORKS[framework], str(c.facts.get("release", ("",))[0] or "")
    r = fw.release(release) if release else None
    return None if r is None or r is fw.newest else r


def moved_default(c: Collector, framework: str, name: str) -> tuple[object, str] | None:
    """(value, source) of memplan field `name`'s default at the release line the reading targets, where that line
    moved it against the newest (Release.defaults), else None. The source reads `NAME@RELEASE default (file:line)`.
    The one way a framework's reader takes a release's defaults: a reader that looks a key up field by field
    (LLaMA-Factory's) asks here where the files leave the key unset; one that reads its flags whole takes them as
    flags (with_defaults)."""
    r = line_read(c, framework)
    d = r.defaults.get(name) if r is not None else None
    return None if d is None else (d.value, default(f"{framework}@{r.name}", d.source))


def with_defaults(c: Collector, framework: str, table, flags: dict[str, Flag]) -> dict[str, Flag]:
    """`flags` with each default the release read changed against the newest (moved_default, by the key table's
    field) as a flag at its source where the flags leave the key unset: the framework's reader, which takes the
    newest's default from its table where a key is unset, then reads the release's."""
    r = line_read(c, framework)
    if r is None:
        return flags
    out = dict(flags)
    for name in r.defaults:
        if name in table.rows and table.key(name) not in out:
            key = table.key(name)
            out[key] = Flag(key, *moved_default(c, framework, name), key)
    return out
