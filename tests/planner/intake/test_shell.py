"""Launch scripts read as bash runs them, without running them: continuations, comments, variables set earlier (and
only those: never this process's environment), arithmetic, sourced files, here-documents, functions, strings handed to
ssh, and the GPU count each launcher starts."""

from pathlib import Path

import pytest

from planner import intake
from planner.intake.collect import UNKNOWN
from planner.intake.shell import read_script


def _script(tmp_path: Path, text: str, name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _argv(tmp_path: Path, text: str) -> list[list[str]]:
    return [c.argv for c in read_script(_script(tmp_path, text)).commands]


def test_a_trailing_backslash_before_a_blank_line_ends_the_command(tmp_path):
    argv = _argv(tmp_path, "torchrun t.py \\\n  --a 1 \\\n\n--b 2\n")
    assert argv == [["torchrun", "t.py", "--a", "1"], ["--b", "2"]]


def test_a_comment_line_inside_a_continued_command_ends_it_as_bash_does(tmp_path):
    """The line after `\\` is a comment: bash ends the command there, so `--deepspeed` is not torchrun's."""
    path = _script(
        tmp_path,
        "torchrun --nproc_per_node 2 train.py \\\n  --per_device_train_batch_size 4 \\\n"
        "#  --lora_r 8 \\\n  --deepspeed ds.json\n",
    )
    reading = intake.read([str(path)])
    assert reading.request["micro_batch"] == 4 and "zero_stage" not in reading.request


def test_quotes_escapes_and_expansions(tmp_path):
    text = (
        "A=1\nB='$A x'\nC=\"$A y\"\nD=${UNSET:-d}\nE=${A:+alt}\nF=${#C}\nG=$((A * 8 + 2))\nH=$(expr 16 / $A)\n"
        "I=${J:=set}\necho skip\nrun \"$B\" \"$C\" $D $E $F $G $H $I $J \\$A 'it''s'\n"
    )
    assert _argv(tmp_path, text) == [["run", "$A x", "1 y", "d", "alt", "3", "10", "16", "set", "set", "$A", "its"]]


def test_unquoted_values_split_and_empty_ones_vanish(tmp_path):
    assert _argv(tmp_path, 'X="a b"\nY=""\nrun $X $Y "$Y" end\n') == [["run", "a", "b", "", "end"]]


def test_variables_come_from_the_script_never_from_this_process(tmp_path, monkeypatch):
    monkeypatch.setenv("BATCH", "16")
    (cmd,) = read_script(_script(tmp_path, "run --n $BATCH ${BATCH:-4} $1 ${2:-two}\n")).commands
    assert cmd.argv == ["run", "--n", UNKNOWN, "4", UNKNOWN, "two"]


def test_prefixes_are_the_commands_environment_and_exports_reach_later_commands(tmp_path):
    text = "export NPROC_PER_NODE=4\nLOCAL=1\nCUDA_VISIBLE_DEVICES=0,1 swift sft --model m\nswift sft\n"
    first, second = read_script(_script(tmp_path, text)).commands
    assert first.env == {"NPROC_PER_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert second.env == {"NPROC_PER_NODE": "4"}


def test_sourced_files_heredocs_functions_and_branches(tmp_path):
    (tmp_path / "setup").mkdir()
    (tmp_path / "setup" / "env.sh").write_text("GPUS=${GPUS:-8}\nBS=$((64 / GPUS))\n")
    text = (
        "source setup/env.sh\ncat > x.yml << EOF\ntorchrun --nproc_per_node 99 bad.py\nEOF\n"
        'f() {\n  torchrun --nproc_per_node 77 inner.py\n}\nif [ -z "$X" ]; then\n  BS=2\nfi\n'
        "torchrun --nproc_per_node=$GPUS train.py --per_device_train_batch_size $BS\n"
    )
    script = read_script(_script(tmp_path, text))
    # the function f is never called: its command is read last, as if it ran, and said so (issue 47 item 3)
    torchruns = [c.argv[:2] for c in script.commands if c.argv[0] == "torchrun"]
    assert torchruns == [["torchrun", "--nproc_per_node=8"], ["torchrun", "--nproc_per_node"]]
    assert script.commands[-2].argv[-1] == "2" and script.files == [tmp_path / "setup" / "env.sh"]
    assert script.notes == ["run.sh:5 function f is not called in run.sh: its commands are read as if it ran"]


def test_a_function_called_in_the_script_runs_there_with_its_arguments(tmp_path):
    text = (
        "train() {\n  torchrun --nproc_per_node $1 t.py \\\n    --per_device_train_batch_size $2\n}\nN=4\ntrain $N 3\n"
    )
    script = read_script(_script(tmp_path, text))
    argv = ["torchrun", "--nproc_per_node", "4", "t.py", "--per_device_train_batch_size", "3"]
    assert [c.argv for c in script.commands] == [argv] and script.notes == []
    one_line = read_script(_script(tmp_path, "go() { torchrun t.py --a 1; }\ngo\n", "one.sh"))
    assert [c.argv for c in one_line.commands] == [["torchrun", "t.py", "--a", "1"]]


def test_a_placeholder_is_a_value_not_a_redirection(tmp_path):
    """`--image_root <your_image_root> \\` in a posted script: read as a redirection it swallowed the next flag, and
    the micro-batch fell back to HF's default 8."""
    text = (
        "torchrun t.py \\\n  --image_root <your_image_root> \\\n  --per_device_train_batch_size 2 --out <path to dir>\n"
    )
    argv = ["torchrun", "t.py", "--image_root", "<your_image_root>", "--per_device_train_batch_size", "2"]
    assert _argv(tmp_path, text) == [argv + ["--out", "<path to dir>"]]
    assert _argv(tmp_path, "python t.py < in.txt > out.log\n") == [["python", "t.py"]]  # still redirections


def test_a_script_folder_from_bash_source_and_cd(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    text = (
        'ROOT="$( cd "$( dirname "${BASH_SOURCE[0]}" )/.." && pwd )"\ncd "$ROOT/run"\n'
        "torchrun --nproc_per_node 2 t.py --deepspeed ../cfg/ds.json --max_length 512\n"
    )
    (tmp_path / "run").mkdir()
    reading = intake.read([str(_script(tmp_path / "run", text))])
    assert reading.request["zero_stage"] == 3 and reading.files[-1] == str(tmp_path / "cfg" / "ds.json")


def test_a_command_string_handed_to_ssh_is_read(tmp_path):
    text = (
        'N=2\nssh host "cd /w && NODE_RANK=0 sudo -E docker run img torchrun --nproc_per_node=4 \\\n'
        '  --nnodes=$N train.py --per_device_train_batch_size 3 --max_length 128" > log 2>&1 &\nwait\n'
    )
    r = intake.read([str(_script(tmp_path, text))]).request
    assert (r["gpus_per_node"], r["nodes"], r["micro_batch"]) == (4, 2, 3)


def test_a_script_run_with_bash_is_read(tmp_path):
    _script(tmp_path, "deepspeed --include localhost:0,1,2 t.py --max_length 64\n", "inner.sh")
    r = intake.read([str(_script(tmp_path, "#!/bin/sh\nbash inner.sh\n"))]).request
    assert r["gpus_per_node"] == 3


@pytest.mark.parametrize(
    "launch,gpus,nodes",
    [
        ("CUDA_VISIBLE_DEVICES=0,1,2 torchrun --nproc-per-node gpu t.py", 3, None),
        ("python -m torch.distributed.run --nnodes 2:4 --nproc_per_node 8 t.py", 8, 2),
        ("deepspeed --num_gpus 4 --num_nodes 2 t.py", 4, 2),
        ("deepspeed --include host1:0,1@host2:0,1 t.py", 2, 2),
        ("accelerate launch --num_processes 8 --num_machines 2 --multi_gpu t.py", 4, 2),
        ("python t.py", 1, None),
        ("torchrun t.py", 1, None),
    ],
)
def test_processes_a_node_and_nodes_by_launcher(tmp_path, launch, gpus, nodes):
    r = intake.read([str(_script(tmp_path, f"{launch} --max_length 64\n"))]).request
    assert (r.get("gpus_per_node"), r.get("nodes")) == (gpus, nodes)


def test_the_first_training_command_leads_and_others_are_named(tmp_path):
    text = (
        "python prep.py --input a\ntorchrun --nproc_per_node 2 sft.py --max_length 64\n"
        "torchrun --nproc_per_node 4 dpo.py --max_length 64\n"
    )
    reading = intake.read([str(_script(tmp_path, text))])
    assert reading.request["gpus_per_node"] == 2
    assert any("run.sh:3 another training command" in line for line in reading.unplanned)


def test_an_sbatch_header_sets_the_slurm_variables_the_script_reads(tmp_path):
    """Issue 47 item 3: VILA-style arithmetic over SLURM_JOB_NUM_NODES (read as its fallback 1 before) from the header."""
    text = (
        "#!/bin/bash\n#SBATCH --job-name=vila\n#SBATCH -N 4\n#SBATCH --gres=gpu:h100:8  # eight a node\n"
        "NNODES=${SLURM_JOB_NUM_NODES:-1}\nGPUS=${SLURM_GPUS_ON_NODE:-1}\nACC=$((2048 / 8 / GPUS / NNODES))\n"
        "srun torchrun --nnodes $NNODES --nproc_per_node $GPUS t.py --gradient_accumulation_steps $ACC\n"
    )
    assert _argv(tmp_path, text) == [
        ["srun", "torchrun", "--nnodes", "4", "--nproc_per_node", "8", "t.py", "--gradient_accumulation_steps", "8"]
    ]
    assert _argv(tmp_path, "#SBATCH --nodes=2-4\nN=${SLURM_NNODES:-1}\ntorchrun --nnodes $N t.py\n") == [
        ["torchrun", "--nnodes", "2", "t.py"]
    ]


def test_a_function_defined_inside_an_uncalled_function_does_not_break_the_reading(tmp_path):
    """The uncalled function's body defines another function while the walker goes over the functions it knows
    (RuntimeError: dictionary changed size during iteration, before)."""
    text = "outer() {\n  inner() {\n    echo hi\n  }\n  inner\n}\ntorchrun --nproc_per_node 2 t.py --max_length 8\n"
    assert _argv(tmp_path, text) == [["torchrun", "--nproc_per_node", "2", "t.py", "--max_length", "8"]]


def test_a_command_line_read_into_a_variable_from_a_heredoc_runs_in_an_if_block(tmp_path):
    """OpenRLHF's examples/scripts (train_ppo_llama.sh, train_sft_llama.sh): `read -r -d '' VAR <<EOF` keeps the
    module and its `\\`-continued flags in VAR (the unquoted delimiter joins them, and expands $), and
    `deepspeed --module $VAR` inside an if block splits it into words; without -d only the first line is read, and a
    quoted delimiter keeps its body literal."""
    text = (
        "LEN=512\nread -r -d '' cmds <<EOF\nopenrlhf.cli.train_sft \\\n   --max_len $LEN \\\n   --bf16\nEOF\n"
        "    # --packing_samples\n"
        "read first <<'END'\n--a $LEN\n--b\nEND\n"
        'if [[ ${1} != "slurm" ]]; then\n    deepspeed --module $cmds $first\nfi\n'
    )
    assert _argv(tmp_path, text) == [
        ["deepspeed", "--module", "openrlhf.cli.train_sft", "--max_len", "512", "--bf16", "--a", "$LEN"]
    ]


def test_a_command_posted_without_its_backslashes_is_read_whole_and_said(tmp_path):
    """ms-swift#3183 as posted: each flag on a line of its own, no `\\`; the flag lines are the command's arguments and
    the `VAR=value` lines just above it its environment (bash would run each line alone), said once. A flag line
    after a blank line, or after an assignment alone, stays a command of its own."""
    text = "A=1  \nNPROC_PER_NODE=7  \nswift rlhf  \n--rlhf_type grpo  \n--lora_rank 8\n\n--stray\nB=2\n--b\n"
    script = read_script(_script(tmp_path, text))
    assert script.commands[0].argv == ["swift", "rlhf", "--rlhf_type", "grpo", "--lora_rank", "8"]
    assert script.commands[0].prefix == {"A": "1", "NPROC_PER_NODE": "7"}
    assert [c.argv for c in script.commands][1:] == [["--stray"], ["--b"]]
    (note,) = script.notes
    assert note.startswith("run.sh:4 lines that begin with a flag follow line 3's swift without a `\\`")


def test_a_continued_command_missing_one_backslash_is_cut_there_as_bash_cuts_it(tmp_path):
    """VLM-R1#215: a `\\`-continued command whose line 3 lacks its `\\` ends there; the flag lines after it are a
    command of their own (bash fails on it), not the first one's arguments, and a line says so."""
    text = "torchrun --nproc_per_node=5 \\\n    train.py \\\n    --bf16\n    --gradient_checkpointing true\n"
    script = read_script(_script(tmp_path, text))
    assert [c.argv for c in script.commands] == [
        ["torchrun", "--nproc_per_node=5", "train.py", "--bf16"],
        ["--gradient_checkpointing", "true"],
    ]
    note = (
        "run.sh:3 has no `\\`: bash ends the command begun on line 1 there, and line 4's --gradient_checkpointing "
        "true is a command of its own (those flags are not passed)"
    )
    assert script.notes == [note]
