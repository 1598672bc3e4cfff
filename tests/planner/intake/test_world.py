"""What a launch starts (issue 47 items 3 and 8): the launchers' short options and second names, deepspeed's hostfile,
srun starting a per-node launcher, a comment line that ends an environment prefix, and every disagreement between the
files (or between the files and check's --gpus-per-node / --nodes) said in one line."""

from pathlib import Path

import pytest

from planner import checkconfig, intake

SWIFT = "swift sft --model Qwen/Qwen2.5-7B-Instruct --train_type lora --max_length 1024"


def _read(tmp_path: Path, text: str, name: str = "run.sh"):
    path = tmp_path / name
    path.write_text(text)
    return intake.read([str(path)])


def _world(reading) -> tuple:
    return reading.request.get("gpus_per_node"), reading.request.get("nodes")


@pytest.mark.parametrize(
    "launch,gpus,nodes",
    [  # deepspeed/launcher/runner.py:51-95 (0.19.8), torch/distributed/run.py:425-439 and argparse_util.py (2.13)
        ("deepspeed -i localhost:0,1,2 t.py", 3, None),
        ("deepspeed --include=localhost:4,5 t.py", 2, None),
        ("deepspeed --num_accelerators 4 t.py", 4, None),
        ("deepspeed -H hostfile t.py", 8, 2),
        ("deepspeed -H hostfile --num_nodes 1 --num_gpus 2 t.py", 2, 1),
        ("deepspeed --hostfile=hostfile -i worker-1 t.py", 8, None),
        ("torchrun --nproc-per-node=4 --nnodes=2 t.py", 4, 2),
        ("PET_NPROC_PER_NODE=4 PET_NNODES=3 torchrun t.py", 4, 3),
        ("torchrun -r 3 -t 3 --nproc_per_node 2 -m pkg.train", 2, None),
        ("python -m torch.distributed.run --nproc-per-node 2 --master-port 29500 t.py", 2, None),
    ],
)
def test_launcher_short_options_and_second_names(tmp_path, launch, gpus, nodes):
    (tmp_path / "hostfile").write_text("# two nodes\nworker-1 slots=8\nworker-2 slots=8\n")
    assert _world(_read(tmp_path, f"{launch} --max_length 64\n")) == (gpus, nodes)


def test_deepspeed_ignores_visible_devices_beside_num_gpus_and_says_so(tmp_path):
    reading = _read(tmp_path, "CUDA_VISIBLE_DEVICES=0,1 deepspeed --num_gpus 4 t.py --max_length 64\n")
    assert _world(reading) == (4, None)
    assert "run.sh:1 CUDA_VISIBLE_DEVICES=0,1 beside --num_gpus 4: deepspeed ignores the variable then" in "\n".join(
        reading.unplanned
    )


def test_a_hostfile_not_given_is_one_line(tmp_path):
    reading = _read(tmp_path, "deepspeed -H /job/missing_hostfile --num_gpus 8 t.py --max_length 64\n")
    assert any("-H /job/missing_hostfile (hostfile not found" in line for line in reading.unplanned)


HEADER = "#!/bin/bash\n#SBATCH -N 4\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:8\n"


@pytest.mark.parametrize(
    "command,nodes,says",
    [
        (  # torchrun without --nnodes runs one node alone on each of srun's nodes
            "srun torchrun --nproc_per_node 8 t.py",
            None,
            (
                "run.sh:5 srun starts torchrun on each of 4 nodes and it sets no node count of its own: 4 runs of one "
                "node each, planned as one (give --nnodes 4 to join them)"
            ),
        ),
        ("srun torchrun --nnodes $SLURM_JOB_NUM_NODES --nproc_per_node 8 t.py", 4, None),
        (
            "srun -N 2 torchrun --nnodes 4 --nproc_per_node 8 t.py",
            4,
            "run.sh:5 srun starts torchrun on 2 nodes and run.sh:5 --nnodes 4 joins 4: planned at 4, the launcher's",
        ),
        (
            "srun --ntasks-per-node=8 python t.py",
            None,
            "run.sh:5 srun starts 8 tasks of python t.py a node: transformers and accelerate read no Slurm variable",
        ),
        ("srun bash -c 'deepspeed --num_gpus 8 t.py --max_length 64'", None, "srun starts deepspeed on each of 4"),
    ],
)
def test_srun_starts_its_launcher_on_each_node(tmp_path, command, nodes, says):
    reading = _read(tmp_path, f"{HEADER}{command} --max_length 64\n")
    assert reading.request.get("nodes") == nodes
    lines = [line for line in reading.unplanned if "srun" in line]
    assert (says is None and not lines) or (says is not None and any(says in line for line in lines)), lines


def test_a_comment_line_that_ends_an_environment_prefix_ends_it_and_the_reading_says_so(tmp_path):
    """bash: `CUDA_VISIBLE_DEVICES=0,1 \\` then a comment line is a command of its own that sets a shell variable
    (not exported): deepspeed then sees every GPU of the host, not two."""
    text = "CUDA_VISIBLE_DEVICES=0,1 \\\n# NPROC_PER_NODE=2 \\\ndeepspeed t.py --max_length 64\n"
    reading = _read(tmp_path, text)
    assert reading.request.get("gpus_per_node") is None
    assert (
        "run.sh:2 the comment line ends the command begun on line 1, as bash ends it (a `\\` does not continue past a "
        "comment): CUDA_VISIBLE_DEVICES=0,1 sets shell variables, not the environment of line 3's deepspeed"
    ) in reading.unplanned
    joined = _read(tmp_path, "CUDA_VISIBLE_DEVICES=0,1 \\\ndeepspeed t.py --max_length 64\n")
    assert joined.request["gpus_per_node"] == 2 and not any("comment line" in line for line in joined.unplanned)
    plain = _read(tmp_path, "torchrun t.py \\\n  --max_length 64\n# a note\n")
    assert not any("comment line" in line for line in plain.unplanned)


def test_a_comment_line_inside_a_command_says_what_it_cut(tmp_path):
    text = "torchrun --nproc_per_node 2 train.py \\\n  --max_length 64 \\\n#  --lora_r 8 \\\n  --deepspeed ds.json\n"
    lines = _read(tmp_path, text).unplanned
    assert any("run.sh:3 the comment line ends the command begun on line 1" in line for line in lines)
    assert any("line 4's --deepspeed ds.json is a command of its own" in line for line in lines)


def test_swift_with_more_visible_gpus_than_processes_plans_the_device_map(tmp_path):
    """ms-swift 4.6.0 swift/utils/env.py:64-83: 4 visible GPUs and 2 processes is MP + DDP, 2 GPUs a process."""
    reading = _read(tmp_path, f"CUDA_VISIBLE_DEVICES=0,1,2,3 NPROC_PER_NODE=2 {SWIFT}\n")
    assert (reading.request["gpus_per_node"], reading.request["device_map"]) == (4, 2)


def _config(tmp_path: Path, text: str, **flags):
    path = tmp_path / "run.sh"
    path.write_text(text)
    return checkconfig.check_config([str(path)], {"gpu": "A100-80GB", **flags}).config


def test_a_flag_that_disagrees_with_the_launch_is_one_line_and_planned(tmp_path):
    config = _config(tmp_path, f"NPROC_PER_NODE=4 NNODES=2 {SWIFT}\n", gpus_per_node=8, nodes=2)
    lines = [line for line in config["unplanned"] if "disagree" in line]
    assert lines == ["--gpus-per-node 8 (given) and run.sh:1 NPROC_PER_NODE=4 (4) disagree: planned with the flag"]
    assert {s["field"]: s["value"] for s in config["settings"]}["gpus_per_node"] == 8


def test_more_processes_than_visible_gpus_yields_to_the_flag_in_one_line(tmp_path):
    """Without the flag the files are refused (test_bad_input); with it the flag is planned and the line says why."""
    config = _config(tmp_path, f"CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=4 {SWIFT}\n", gpus_per_node=2)
    said = [line for line in config["unplanned"] if "NPROC_PER_NODE=4" in line]
    assert len(said) == 1 and said[0].endswith(
        "(as written, the run fails there; planned with the flag --gpus-per-node)"
    )


def test_nodes_given_beside_a_slurm_script_are_the_jobs_and_its_arithmetic_follows(tmp_path):
    """Issue 47: VILA's NVILA-Lite sft.sh computes its micro-batch from NNODES=${SLURM_JOB_NUM_NODES:-1} (its setups/
    train.sh): without a header, 2048 / 1 node / 8 GPUs / 2 = 128; `--nodes 4` is the job's node count, so 32."""
    script = Path(__file__).resolve().parents[2] / "data/frameworks/scripts/VILA/scripts/NVILA-Lite/sft.sh"
    assert intake.read([str(script)]).request["micro_batch"] == 128
    config = checkconfig.check_config([str(script)], {"gpu": "H100", "model": "qwen2.5-7b", "nodes": 4}).config
    fields = {s["field"]: s["value"] for s in config["settings"]}
    assert (fields["micro_batch"], fields["nodes"]) == (32, 4)
    said = [line for line in config["unplanned"] if "(given) read as the Slurm job's" in line]
    assert said == [
        "--nodes 4 (given) read as the Slurm job's SLURM_JOB_NUM_NODES: the script's own arithmetic follows the flag"
    ]


@pytest.mark.parametrize(
    "flags,precision,says",
    [  # transformers 5.25 training_args.py:1612-1618: the trainer's bf16/fp16 over ACCELERATE_MIXED_PRECISION
        ("--bf16 true", "bf16", None),
        ("--fp16 true", "fp16", "(the trainer's run.sh:1 --fp16 true decides: fp16)"),
        ("--bf16 false", "bf16", None),
    ],
)
def test_the_accelerate_configs_mixed_precision_beside_the_trainers(tmp_path, flags, precision, says):
    (tmp_path / "acc.yaml").write_text("distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_processes: 2\n")
    text = f"accelerate launch --config_file acc.yaml train.py --model_name_or_path Qwen/Qwen2.5-7B {flags}"
    reading = _read(tmp_path, text + " --max_length 64\n")
    setting = next(s for s in reading.settings if s.field == "precision")
    assert setting.value == precision and "acc.yaml: mixed_precision: bf16" in (setting.source + str(reading.unplanned))
    assert [line for line in reading.unplanned if "decides" in line] == (
        [f"acc.yaml: mixed_precision: bf16 (via run.sh:1 --config_file acc.yaml) {says}"] if says else []
    )
