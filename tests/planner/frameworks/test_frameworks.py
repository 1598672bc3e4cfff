"""The framework adapters (planner.frameworks): every value they name is a real knob value, every default cites the
file it was read from, `suggest --framework X` ranks only plans X runs, and `check --framework X` refuses, in one
line, a knob X cannot run."""

import pytest

from planner import advise
from planner.config.knobfields import KNOBS, KnobFields, choices
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, NAMES, frameworks_json
from planner.frameworks.base import KNOB_DEFAULTS, NEUTRAL
from planner.frameworks.rules import Where
from planner.model import catalog
from planner.model.catalog import load_model

KINDS = tuple(Workload.model_fields["kind"].annotation.__args__)


@pytest.mark.parametrize("name", NAMES)
def test_what_an_adapter_runs_is_named_in_the_knobs_own_values(name):
    f = FRAMEWORKS[name]
    assert set(f.runs) <= set(KNOBS) and not set(f.runs) & set(f.every)
    for knob, values in f.runs.items():
        allowed = {
            "workload": KINDS,
            "lora_rank": ("on", "off"),
            "expert_parallel": ("on", "off"),
            "tensor_parallel": ("on", "off"),
            "sequence_parallel": ("on", "off"),
            "context_parallel": ("on", "off"),
            "device_map": ("on", "off"),
            "optimizer_in_backward": (True, False),
            "lora_vision": (True, False),
        }.get(knob) or choices(knob)
        if allowed is None:  # a number knob (num_labels, negatives): values of its type
            allowed = [v for v in values if isinstance(v, KnobFields.model_fields[knob].annotation)]
        assert values and set(values) <= set(allowed), (knob, values)
    for knob, d in f.defaults.items():
        assert any(s in d.source for s in (".py", ".yaml", "default")), (knob, d.source)


@pytest.mark.parametrize("name", NAMES)
def test_a_framework_decides_every_knob_and_a_new_knob_runs_only_its_default(name):
    """Issue 46 item 3, closed by default: every knob of the declaration is in the adapter's runs or its every; a knob
    it does not name (a new one) runs only its declared default, refused in one line otherwise."""
    from dataclasses import replace

    f = FRAMEWORKS[name]
    assert set(KNOBS) - set(NEUTRAL) == set(f.runs) | set(f.every), name
    knob = "eval_logits_steps"  # as if the adapter did not name it
    every, runs = tuple(k for k in f.every if k != knob), {k: v for k, v in f.runs.items() if k != knob}
    closed = replace(f, every=every, runs=runs, rules=())  # its values alone, not its rules between knobs
    assert closed.cannot({knob: 0}) is None  # its default runs
    field, reason = closed.cannot({knob: 3})
    assert field == knob and reason.endswith("cannot run --eval-logits-steps 3: it runs only the default, 0")


def test_the_frameworks_json_lists_every_framework_with_its_sources():
    data = frameworks_json()["frameworks"]
    assert [f["name"] for f in data] == list(NAMES) and "memplan" in NAMES
    swift = next(f for f in data if f["name"] == "swift")
    assert swift["defaults"]["checkpointing"]["value"] == "full"  # ms-swift's gradient_checkpointing True
    assert "trainers/arguments.py:135" in swift["defaults"]["checkpointing"]["source"]
    assert swift["runs"]["checkpointing"] == ["off", "full"]


def test_the_frameworks_table_marks_a_workload_a_rule_refuses():
    """Stop 66 noticed the table listing axolotl's kto as run while a rule refused it. axolotl 0.17+ plans it with an
    adapter (its full fine-tuning refused on lora_rank, not the workload: planner.frameworks.axolotl.kto), so no
    newest line refuses a workload it reads; a rule refusing one at the default knobs is marked."""
    from dataclasses import replace

    from planner.frameworks import _refused_workloads
    from planner.frameworks.base import Rule

    refused = {f["name"]: f["refused"]["workload"] for f in frameworks_json()["frameworks"]}
    assert refused["axolotl"] == [] and refused["trl"] == [] and refused["swift"] == []
    kto_refused = replace(
        FRAMEWORKS["axolotl"], rules=(Rule("workload", "no", lambda k: k["workload"]["kind"] == "kto"),)
    )
    assert _refused_workloads(kto_refused) == ["kto"]
    from planner.cli.render_listings import frameworks_table

    data = frameworks_json()
    row = next(r for r in frameworks_table(data).rows if r[0] == "axolotl")
    assert "kto" in row[3] and "(refused)" not in row[3] and "dpo," in row[3]
    next(f for f in data["frameworks"] if f["name"] == "axolotl")["refused"]["workload"] = ["kto"]
    row = next(r for r in frameworks_table(data).rows if r[0] == "axolotl")
    assert "kto (refused)" in row[3]


CHECK = {"model": "qwen2.5-7b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 2048}


@pytest.mark.parametrize(
    "name,knob,value,flag",
    [
        ("swift", "checkpointing", "selective-op", "--checkpointing selective-op"),
        ("llamafactory", "loss", "chunked", "--loss chunked"),
        ("hf", "batching", "packed", "--batching packed"),
        ("llamafactory", "workload", {"kind": "grpo"}, "--workload grpo"),
        ("deepspeed", "fsdp", "full", "--fsdp full"),
        ("axolotl", "checkpointing", "every-4", "--checkpointing every-4"),
    ],
)
def test_check_refuses_in_one_line_a_knob_the_framework_cannot_run(name, knob, value, flag):
    req = {**CHECK, "framework": name, knob: value}
    if knob == "workload":
        req.pop("seq_len")  # an RL workload's sequence is its prompt + completion
    with pytest.raises(BadInput) as e:
        advise.check(advise.parse(advise.CheckRequest, req))
    assert e.value.field == knob and "\n" not in str(e.value)
    assert str(e.value).startswith(f"--framework {name} (") and f"cannot run {flag}:" in str(e.value)
    advise.check(advise.parse(advise.CheckRequest, {**req, "framework": "memplan"}))  # the bundled trainer runs it


def _runs(name: str, plan) -> bool:
    return FRAMEWORKS[name].cannot(plan.knobs.model_dump()) is None


SUGGEST_SHAPES = ((8, 2048), (64, 8192))
_PLAIN: dict = {}  # (model, batch, seq) -> memplan's own answer, the same for every framework's case


def _plain(body: dict):
    key = (body["model"], body["global_batch"], body["seq_len"])
    if key not in _PLAIN:
        _PLAIN[key] = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    return _PLAIN[key]


# every catalog model at one of the two shapes in turn on every commit (both shapes, every model there), each at both
# in the sweep tier: since stop 69, for CI's room (hf, llamafactory and swift took 60, 56 and 48 s of make test)
@pytest.mark.parametrize("tier", ["commit", pytest.param("sweep", marks=pytest.mark.sweep)])
@pytest.mark.parametrize("name", ["swift", "llamafactory", "hf"])
def test_suggest_for_a_framework_never_returns_a_knob_it_cannot_run(name, tier):
    """Every catalog model at two shapes (one node of H100s: 8 x 2048 and 64 x 8192 tokens): each plan and each
    rejected candidate is one the framework runs, and the default (memplan) answer shows the test can fail."""
    seen_other = False
    for i, model in enumerate(catalog.model_names()):
        turn = SUGGEST_SHAPES[i % len(SUGGEST_SHAPES)]
        for batch, seq in (turn,) if tier == "commit" else tuple(s for s in SUGGEST_SHAPES if s != turn):
            body = {
                "model": model,
                "gpu": "h100",
                "gpus_per_node": 8,
                "global_batch": batch,
                "seq_len": seq,
                "evidence": "analytic",
                "top": 20,
            }
            try:
                plain = _plain(body)
            except BadInput:
                continue  # a shape the model cannot take (learned positions): nothing to compare
            where = Where(model=load_model(model))  # a model the framework refuses (or writes no file for)
            if FRAMEWORKS[name].unwritten({}, where) or FRAMEWORKS[name].cannot_here(dict(KNOB_DEFAULTS), where):
                with pytest.raises(BadInput, match=f"--framework {name} "):  # its scope refuses the model in one line
                    advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": name}), with_nearest=False)
                continue
            res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": name}), with_nearest=False)
            assert all(p.framework == name and _runs(name, p) for p in res.plans + res.rejected), model
            seen_other = seen_other or any(not _runs(name, p) for p in plain.plans)
    assert seen_other


@pytest.mark.parametrize(
    "name,fields,field",
    [
        ("swift", {"batching": "packed"}, "batching"),
        ("swift", {"workload": {"kind": "dpo", "precompute_ref_log_probs": True}}, "workload"),
        ("llamafactory", {"workload": {"kind": "dpo", "precompute_ref_log_probs": True}}, "workload"),
        ("axolotl", {"fsdp": "full", "optimizer": "adamw-8bit"}, "optimizer"),
    ],
)
def test_a_combination_the_framework_refuses_is_refused_for_it_alone(name, fields, field):
    """A framework's rules (its exporter would refuse the plan): refused with the framework's file cited, and the
    same request for the bundled trainer is planned."""
    req = {**CHECK, **fields, "framework": name}
    if "workload" in fields:
        req.pop("seq_len")  # an RL workload's sequence is its own
    with pytest.raises(BadInput) as e:
        advise.check(advise.parse(advise.CheckRequest, req))
    assert e.value.field == field and ".py:" in str(e.value) and str(e.value).startswith(f"--framework {name} (")
    advise.check(advise.parse(advise.CheckRequest, {**req, "framework": "memplan"}))


@pytest.mark.parametrize(
    "name,lora_keys",
    [
        ("llamafactory", ["finetuning_type: lora", "lora_rank: 16"]),
        ("swift", ["--tuner_type: lora", "--lora_rank: 16"]),
        ("axolotl", ["adapter: lora", "lora_r: 16"]),
        ("hf", ["LoraConfig.r: 16"]),
    ],
)
def test_the_nearest_settings_are_said_in_the_frameworks_own_keys(name, lora_keys):
    """A full fine-tune that does not fit: the nearest LoRA setting is said in the framework's keys (read off the
    files its export writes), with the batch split it needs; the bundled trainer's answer has no keys."""
    req = {**CHECK, "micro_batch": 4, "grad_accum": 2, "seq_len": 4096, "checkpointing": "off", "framework": name}
    res = advise.check(advise.parse(advise.CheckRequest, req))
    assert not res.plan.fits
    lora = next(n for n in res.nearest if n.changes == {"lora_rank": 16})
    assert set(lora_keys) <= set(lora.keys), lora.keys
    micro = {
        "llamafactory": "per_device_train_batch_size",
        "swift": "--per_device_train_batch_size",
        "axolotl": "micro_batch_size",
        "hf": "per_device_train_batch_size",
    }[name]
    if lora.plan.micro_batch != 4:
        assert f"{micro}: {lora.plan.micro_batch}" in lora.keys
    plain = advise.check(advise.parse(advise.CheckRequest, {**req, "framework": "memplan"}))
    assert plain.nearest and all(n.keys == [] for n in plain.nearest)


def test_a_framework_folder_with_a_writer_declares_it_and_export_dispatches_to_it():
    """Framework.writes is the registry's word for planner.export.launch: every folder holding writer.py says so,
    and no other, so a plan goes to its folder's writer with no per-framework dict in export."""
    from pathlib import Path

    from planner.export import launch

    folders = Path(__file__).resolve().parents[3] / "planner" / "frameworks"
    with_writer = {p.parent.name for p in folders.glob("*/writer.py")}
    assert with_writer == {name for name, fw in FRAMEWORKS.items() if fw.writes}
    assert {name for name in FRAMEWORKS if launch.exporter(name) is not None} == with_writer
    assert launch.exporter("swift").__name__ == "planner.frameworks.swift.writer" and launch.exporter("hf") is None


@pytest.mark.parametrize("gpu,expected", [("h100", "bf16-pure"), ("v100-32gb", "fp32")])
def test_a_request_naming_no_precision_runs_one_the_framework_runs(gpu, expected):
    """torchtune runs bf16-pure or fp32 alone (its recipes' dtype): with no --precision, suggest and check plan its
    own default, or fp32 on a GPU without bf16, where the request's bf16 default would refuse the framework whole."""
    body = {"model": "llama-3.2-1b", "gpu": gpu, "gpus_per_node": 8, "seq_len": 2048, "framework": "torchtune"}
    res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "global_batch": 16, "top": 3}))
    assert res.plans and {p.precision for p in res.plans} == {expected}
    check = advise.check(advise.parse(advise.CheckRequest, {**body, "micro_batch": 1, "grad_accum": 2, "fsdp": "full"}))
    assert check.plan.precision == expected
    assert FRAMEWORKS["hf"].precision(True) == "bf16" and FRAMEWORKS["hf"].precision(False) == "fp16"
