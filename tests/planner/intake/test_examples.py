"""Every committed example configuration (tests/data/frameworks/: LLaMA-Factory, ms-swift, axolotl, VLM-R1, VILA and
TRL files copied from their repositories, and configurations written for these tests) is read by planner.intake.read,
each field with a source that names the file it came from or the default it took (with its citation), and the request
it gives is one planner.advise.check answers, or refuses in one line because the model is not found offline."""

import re
from pathlib import Path

import pytest

from planner import advise, intake
from planner.errors import BadInput
from planner.intake.collect import is_default
from planner.intake.models import lookup
from tests.planner.cli.helpers import flags_of
from tests.planner.intake.conftest import DATA, REFUSED, examples

EXAMPLES = examples()
CITATION = re.compile(r"\([^()]*[\w/.-]+\.(py|json|yaml)(:[\d,-]+)?[^()]*\)")


# examples their framework's release line refuses in one line, which the bundled trainer cannot run either:
# ms-swift 4's HQQ example (--tuner_type: the 4 line, planned on transformers 5, whose HqqHfQuantizer has no
# quantize ops: rules.transformers_5_quant)
NOT_AT_ITS_LINE = {
    DATA / "swift/examples/train/qlora/hqq.sh": "give --framework swift@3.9",
}
# LLaMA-Factory 0.9.5 runs OFT on a GPTQ or AWQ base (model/adapter.py:306-308), which memplan plans since stop 74
# (planner.config.spec_lora.oft_rules; refused before): its two examples plan
QOFT = [DATA / f"llamafactory/examples/extras/qoft/llama3_oft_sft_{q}.yaml" for q in ("gptq", "awq")]


# what a refusal says beside the value it names, where it is not "not planned"
SAID = {
    "AutoTP": "1 is accepted",
    "aqlm": "memplan plans",
    "chat's": "LLaMA-Factory trains nothing",
    "llamafactory-cli": "LLaMA-Factory trains nothing",
    "prediction run": "LLaMA-Factory trains nothing",
    "Megatron-SWIFT": "is not read",
    "v1 takes": "model_args.py:64-68",  # LLaMA-Factory v1's own parser stops on the file (its flash_attn values)
    "not a training configuration": "accepted:",  # v1's merge file: no training keys
    "Bradley-Terry": "give --model qwen3-8b",  # a checkpoint whose shapes are unpinned: the catalog model that plans it
}


def _id(p: Path) -> str:
    return str(p.relative_to(DATA))


def test_there_are_examples_of_every_source():
    """At least five a framework, as the task asks."""
    counts = {
        k: sum(1 for p in EXAMPLES if _id(p).startswith(k))
        for k in ("llamafactory/", "swift/", "axolotl/", "scripts/VLM-R1", "scripts/VILA", "scripts/trl")
    }
    assert all(counts[k] >= 5 for k in ("llamafactory/", "swift/", "axolotl/")), counts
    assert counts["scripts/VLM-R1"] + counts["scripts/VILA"] + counts["scripts/trl"] >= 15, counts
    for sources in ("llamafactory/examples", "swift/examples", "axolotl", "scripts", "memplan"):
        assert (DATA / sources / "SOURCES.md").is_file()


@pytest.mark.parametrize("path", sorted(REFUSED), ids=_id)
def test_an_example_memplan_does_not_plan_is_refused_in_one_line(path):
    """BAdam and Adam-mini: refused naming the key and the tuner, never planned as LoRA, full
    fine-tuning or AdamW (planner.intake.tuners); OpenRLHF's AutoTP: refused naming the flag and the value accepted."""
    with pytest.raises(BadInput) as e:
        intake.read([str(path)])
    said = next((w for k, w in SAID.items() if k in REFUSED[path]), "not planned")
    assert REFUSED[path] in str(e.value) and said in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("path", EXAMPLES, ids=_id)
def test_every_example_is_read_with_provenance(path):
    reading = intake.read([str(path)])
    assert reading.framework in intake.FRAMEWORKS
    assert reading.files and Path(reading.files[0]).name == path.name
    names = {Path(f).name for f in reading.files}
    fields = [s.field for s in reading.settings]
    assert len(fields) == len(set(fields)), fields  # one setting a field
    for s in reading.settings:
        named = any(n in s.source for n in names)
        cited = is_default(s.source) and (CITATION.search(s.source) or "memplan assumption" in s.source)
        assert named or cited, s
        assert s.key
        value = reading.request
        for part in s.field.split(".", 2) if s.field.startswith("workload.roles.") else s.field.split(".", 1):
            value = value[part]  # workload.<input>, workload.roles.<setting>: nested as the request nests them
        assert value == s.value
    assert "gpu" not in reading.request
    assert all("\n" not in line and line for line in reading.unplanned)


def answered(reading) -> dict:
    """The reading's request with its world questions answered (Reading.unknown_world: a count the files leave to a
    variable, which check --config asks for): 8 GPUs a node, 1 node, and the fields derived from them again."""
    if not reading.unknown_world:
        return dict(reading.request)
    body = {**reading.request, **{f: 8 if f == "gpus_per_node" else 1 for f, _ in reading.unknown_world}}
    return body | {f: again(body) for f, (_, again) in reading.derived.items() if f in ("grad_accum", "micro_batch")}


@pytest.mark.parametrize("path", EXAMPLES, ids=_id)
def test_every_example_checks_or_names_its_model(path):
    """A request whose model resolves is checked on an H100 without an exception; one whose model memplan cannot find
    offline (or that names none: a DeepSpeed or accelerate config alone) is one line about the model."""
    reading = intake.read([str(path)])
    body = {**answered(reading), "gpu": "h100"}
    model = reading.request.get("model")
    resolved = model is not None and lookup(str(model), path.parent) is not None
    rows_known = "seq_len" in reading.request or "workload" in reading.request
    if resolved and rows_known and path in NOT_AT_ITS_LINE:
        with pytest.raises(BadInput) as e:
            advise.check(advise.parse(advise.CheckRequest, body))
        assert NOT_AT_ITS_LINE[path] in str(e.value) and "\n" not in str(e.value)
        return
    if resolved and rows_known:
        result = advise.check(advise.parse(advise.CheckRequest, body))
        assert result.plan.micro_batch == reading.request["micro_batch"]
        return
    with pytest.raises(BadInput) as e:
        advise.check(advise.parse(advise.CheckRequest, body))
    assert e.value.field == ("model" if not resolved else "seq_len") and "\n" not in str(e.value)
    if resolved:  # a plain Trainer's configuration names no sequence length: the reading says so
        assert any("no sequence length" in line for line in reading.unplanned)


def comparable(path: Path) -> bool:
    """An example whose model memplan finds offline and whose rows have a length (the others are one line about
    that: test_every_example_checks_or_names_its_model)."""
    request = intake.read([str(path)]).request
    model = request.get("model")
    return (
        model is not None
        and lookup(str(model), path.parent) is not None
        and ("seq_len" in request or "workload" in request)
    )


COMPARABLE = [p for p in EXAMPLES if comparable(p) and p not in NOT_AT_ITS_LINE]
# examples compared since their Qwen ids resolve (issue 47 item 4: Qwen3-4B-Instruct-2507, Qwen2-7B's shapes): the
# LLaMA-Factory LoRA and full rows, verl's and TRL's LoRA run per commit; the other stages and optimizers of the same
# readers and model in the sweep tier (CI's time: ~0.2 s each)
SWEEP_COMPARED = {
    "llamafactory/examples/extras/muon/qwen2_full_sft.yaml",
    "llamafactory/examples/train_lora/qwen3_lora_dpo.yaml",
    "llamafactory/examples/train_lora/qwen3_lora_kto.yaml",
    "llamafactory/examples/train_lora/qwen3_lora_pretrain.yaml",
    "llamafactory/examples/train_lora/qwen3_lora_reward.yaml",
    "llamafactory/examples/train_lora/qwen3_lora_sft_ds3.yaml",
    "llamafactory/examples/train_qlora/qwen3_lora_sft_otfq.yaml",
    "scripts/trl/accelerate_launch_trl_sft_peft.sh",
    "scripts/trl/sft_py_full_training.sh",
}


def test_enough_examples_are_compared_with_their_flags():
    assert len(COMPARABLE) >= 40, len(COMPARABLE)


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=_id(p), marks=pytest.mark.sweep if _id(p) in SWEEP_COMPARED else ()) for p in COMPARABLE],
)
def test_every_example_gives_the_plan_its_flags_give(path):
    """`check --config FILE --gpu h100` and `check --gpu h100` with the same settings as flags (as a user would type
    them) give the same plan, both parsed by the real CLI parser (issue 31 item 4). Where the files leave the release
    open and the verdict differs between those they allow, the flags name the release check --config planned (issue
    47 item 1: the hungrier)."""
    from planner.cli import build_parser, check

    reading = intake.read([str(path)])
    parser = build_parser()
    world = ["--gpus-per-node", "8"] if reading.unknown_world else []  # the answer check --config asks for
    _, by_config = check.gather(parser.parse_args(["check", "--config", str(path), "--gpu", "h100", *world]))
    planned = (by_config.config.get("releases") or {}).get("planned")
    if planned:
        reading = intake.read([str(path)], given={"framework": f"{reading.framework}@{planned}"})
    request = answered(reading)
    if by_config.open_length and reading.open_length:  # a length left at the model's context: planned where it fits
        *parents, leaf = reading.open_length.split(".")
        request = {**request, **({p: {**request[p]} for p in parents})}
        (request[parents[0]] if parents else request)[leaf] = by_config.open_length["planned_at"]
    _, by_flags = check.gather(parser.parse_args(["check", *flags_of(request), "--gpu", "h100"]))
    a, b = by_config.plan, by_flags.plan
    assert (a.micro_batch, a.grad_accum, a.world_size, dict(a.knobs)) == (
        b.micro_batch,
        b.grad_accum,
        b.world_size,
        dict(b.knobs),
    )
    assert a.memory.device_total_bytes == b.memory.device_total_bytes


@pytest.mark.parametrize("path", QOFT, ids=_id)
def test_oft_on_a_prequantized_checkpoint_plans(path):
    reading = intake.read([str(path)])
    result = advise.check(advise.parse(advise.CheckRequest, {**answered(reading), "gpu": "h100"}))
    quant = "gptq" if "gptq" in path.name else "awq"
    assert (result.plan.knobs.lora_variant, result.plan.knobs.quant) == ("oft", quant)
