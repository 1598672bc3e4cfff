"""OpenRLHF's DeepSpeed AutoTP (--ds_tensor_parallel_size from v0.7.4, --ds.tensor_parallel_size from v0.10.2) and ring
attention (--ring_attn_size, --ds.ring_attn_size): 1 read as tensor_parallel or context_parallel 1, above 1 refused in
one line naming the value and the 1 accepted, on every entry point memplan reads (train_sft, train_dpo, train_ppo_ray)
and the forks (planner.frameworks.openrlhf.reader_flags.refuse_parallel_groups). On OpenRLHF's own AutoTP example
(v0.8.9 examples/scripts/train_sft_llama_tensor_parallelism.sh, copied verbatim)."""

import pytest

from planner import intake
from planner.errors import BadInput
from tests.planner.intake.conftest import DATA

EXAMPLE = DATA / "scripts" / "OpenRLHF" / "examples" / "scripts" / "train_sft_llama_tensor_parallelism.sh"
GIVEN = {"model": "llama-3.1-8b", "gpus_per_node": 8}


def test_openrlhfs_autotp_example_is_refused_in_one_line():
    with pytest.raises(BadInput) as e:
        intake.read([str(EXAMPLE)], given=GIVEN)
    said = str(e.value)
    assert said.startswith(
        "train_sft_llama_tensor_parallelism.sh:31 --ds_tensor_parallel_size 2: memplan plans no DeepSpeed AutoTP"
    )
    assert "deepspeed.py:228-231" in said and said.endswith("1 is accepted: give --ds_tensor_parallel_size 1")
    assert "\n" not in said and e.value.field == "tensor_parallel"


@pytest.mark.parametrize(
    ("entry", "flag"),
    [
        ("openrlhf.cli.train_ppo_ray --advantage_estimator group_norm", "--ds.tensor_parallel_size 4"),
        ("openrlhf.cli.train_dpo", "--ds_tensor_parallel_size 2"),
        ("openrlhf.cli.train_ppo_ray --freeze_prefix visual", "--ds_tensor_parallel_size 2"),  # LMM-R1 dev
        ("openrlhf.cli.train_sft", "--ring_attn_size 4"),
        ("openrlhf.cli.train_ppo_ray --advantage_estimator group_norm", "--ds.ring_attn_size 2"),
    ],
)
def test_every_entry_point_refuses_autotp_and_ring_attention_above_one(tmp_path, entry, flag):
    path = tmp_path / "run.sh"
    path.write_text(f"deepspeed --module {entry} --pretrain Qwen/Qwen2.5-VL-7B-Instruct --bf16 {flag}\n")
    with pytest.raises(BadInput, match=f"run.sh:1 {flag}: memplan plans no (DeepSpeed AutoTP|ring attention)") as e:
        intake.read([str(path)], given={"gpus_per_node": 8})
    assert str(e.value).endswith(f"give {flag.split()[0]} 1")


def test_one_is_read_as_tensor_and_context_parallel_one(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(EXAMPLE.read_text().replace("--ds_tensor_parallel_size 2", "--ds_tensor_parallel_size 1"))
    s = {x.field: x for x in intake.read([str(path)], given=GIVEN).settings}
    assert s["tensor_parallel"].value == 1 and "--ds_tensor_parallel_size 1" in s["tensor_parallel"].source
    path.write_text(path.read_text().replace("--packing_samples", "--packing_samples --ring_attn_size 1"))
    s = {x.field: x for x in intake.read([str(path)], given=GIVEN).settings}
    assert (
        s["context_parallel"].value == 1 and "--ring_attn_size 1 (ring attention off)" in s["context_parallel"].source
    )
