"""One way a framework's reader takes a release's defaults (planner.intake.line_defaults.moved_default): LLaMA-Factory's
reader, which looks its keys up field by field, and verl's and OpenRLHF's, which take them as flags (with_defaults),
each give a moved default the same `NAME@RELEASE default (file:line)` source, read at the line the pin beside the
files names; the file's own key wins over it, and the newest line moves nothing."""

from pathlib import Path

import pytest

from planner import intake
from planner.frameworks import FRAMEWORKS
from planner.intake.collect import default

DATA = Path(__file__).parents[2] / "data" / "frameworks"
LF_YAML = "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: lora\nlora_target: all\n{extra}\n"
ORL = (
    "python3 -m openrlhf.cli.train_ppo_ray --actor_num_nodes 1 --actor_num_gpus_per_node 2 --vllm_num_engines 2 "
    "--pretrain Qwen/Qwen2.5-0.5B-Instruct --reward_pretrain Qwen/Qwen2.5-0.5B-Instruct --train_batch_size 64 "
    "--rollout_batch_size 64 --bf16 --zero_stage 2 --prompt_max_len 512 --generate_max_len 512{extra}\n"
)


def _verl(extra: str) -> str:
    lines = (DATA / "verl/examples/run_qwen2-7b_seq_balance.sh").read_text().splitlines(keepends=True)
    return "".join(x for x in lines if "use_remove_padding" not in x and "enforce_eager" not in x) + extra


# (framework, pin, the file's name, its text with {extra} where the key goes, the release's field, the reading's
# field it lands in, the key set by hand and the value the reading then takes)
CASES = [
    ("llamafactory", "llamafactory==0.9.0", "train.yaml", LF_YAML, "seq_len", "seq_len", "cutoff_len: 4096", 4096),
    (
        "llamafactory",
        "llmtuner==0.5.3",
        "train.yaml",
        LF_YAML,
        "optimizer",
        "optimizer",
        "optim: adafactor",
        "adafactor",
    ),
    ("openrlhf", "openrlhf==0.9.0", "run.sh", ORL, "micro_batch", "micro_batch", " --micro_train_batch_size 2", 2),
    ("verl", "verl==0.4.1", "run.sh", None, "remove_padding", "workload.roles.remove_padding", "", None),
]


def _settings(tmp_path: Path, pin: str, name: str, text: str) -> dict:
    (tmp_path / "requirements.txt").write_text(pin + "\n")
    (tmp_path / name).write_text(text)
    return {s.field: s for s in intake.read([str(tmp_path / name)]).settings}


@pytest.mark.parametrize("framework, pin, name, text, field, lands, own, value", CASES, ids=[c[1] for c in CASES])
def test_each_reader_takes_a_moved_default_with_the_one_source_text(
    tmp_path, framework, pin, name, text, field, lands, own, value
):
    fw = FRAMEWORKS[framework]
    line = fw.release(pin.split("==")[1])
    d = line.defaults[field]
    assert d != fw.defaults.get(field)  # a default the line moved
    s = _settings(tmp_path, pin, name, text.format(extra="") if text else _verl(""))
    assert s["framework"].value == f"{framework}@{line.name}"
    assert s[lands].value == d.value
    assert s[lands].source.startswith(default(f"{framework}@{line.name}", d.source))
    if own:  # the file's own key wins over the release's default
        mine = _settings(tmp_path, pin, name, text.format(extra=own))
        assert f"{framework}@{line.name} default" not in mine[lands].source
        assert mine[lands].value == value and own.strip() in mine[lands].source


def test_the_newest_line_moves_no_default(tmp_path):
    """A pin of the newest LLaMA-Factory: cutoff_len is the 0.9.5 table's default, named without a release."""
    s = _settings(tmp_path, "llamafactory==0.9.5", "train.yaml", LF_YAML.format(extra=""))
    assert s["framework"].value == "llamafactory" and s["seq_len"].value == 2048
    assert "llamafactory@" not in s["seq_len"].source
