"""RL plans exported for verl 0.9.1 (verl_ppo.sh, main_ppo's Hydra overrides) and OpenRLHF 0.11.2 (openrlhf_ppo.sh,
train_ppo_ray's dotted flags), each loaded by the framework's own code in its venv (validators/verl_rl_validate.py,
openrlhf_validate.py): the keys they write, the split and roles they carry, and the refusals."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from planner import advise, intake
from planner.errors import BadInput
from planner.export import launch
from planner.export.keys import script_flags
from planner.frameworks.openrlhf import writer as openrlhf
from planner.frameworks.verl import writer_rl as verl_rl

VALIDATORS = Path(__file__).parent / "validators"
BASE = {"model": "qwen2.5-1.5b", "gpu": "h100", "gpus_per_node": 8, "checkpointing": "full", "attention": "flash"}
RL = {"num_generations": 4, "max_prompt_length": 512, "max_completion_length": 1024, "beta": 0.001}
CASES = {
    "verl": {
        "ppo": {
            "micro_batch": 4,
            "grad_accum": 2,
            "fsdp": "full",
            "workload": {"kind": "ppo", **RL, "roles": {"reward_model": "qwen2.5-0.5b", "reward_memory": 0.3}},
        },
        # Ulysses: the actor's ulysses_sequence_parallel_size, the reference following it (ref/dp_ref.yaml:39)
        "grpo_ulysses": {
            "micro_batch": 2,
            "grad_accum": 2,
            "fsdp": "full",
            "attention": "flash",
            "sequence_parallel": 2,
            "workload": {"kind": "grpo", **RL},
        },
        "grpo_budget": {
            "micro_batch": 2,
            "grad_accum": 4,
            "fsdp": "full",
            "workload": {
                "kind": "grpo",
                **RL,
                "roles": {"max_tokens_per_gpu": 8192, "rollout_tp": 2, "offload": ["actor-params", "actor-optimizer"]},
            },
        },
        # a VLM's images within the processor's pixel bounds: data.mm_processor_kwargs (writer_rl.media_overrides),
        # two a row: +actor_rollout_ref.rollout.limit_images (writer_rl.limit_overrides; RolloutConfig refuses a
        # misspelt field: TypeError, unexpected keyword argument)
        "grpo_vlm": {
            "model": "qwen2.5-vl-3b",
            "micro_batch": 2,
            "grad_accum": 2,
            "fsdp": "full",
            "images": 2,
            "max_pixels": 401408,
            "workload": {"kind": "grpo", **RL, "max_prompt_length": 1024},
        },
    },
    "openrlhf": {
        "grpo_colocate": {
            "micro_batch": 4,
            "grad_accum": 2,
            "zero_stage": 3,
            "workload": {"kind": "grpo", **RL, "roles": {"sleep_level": 1, "rollout_memory": 0.5}},
        },
        "dpo": {"micro_batch": 2, "grad_accum": 2, "zero_stage": 3, "workload": {"kind": "dpo", "max_length": 2048}},
        "sft": {"micro_batch": 2, "grad_accum": 4, "zero_stage": 2, "seq_len": 2048, "workload": {"kind": "sft"}},
        # LoRA on named modules: --ds.lora.target_modules q_proj v_proj (nargs="*"), through train_sft's parser
        "sft_lora": {
            "micro_batch": 2,
            "grad_accum": 4,
            "seq_len": 2048,
            "lora_rank": 8,
            "lora_targets": "q_proj,v_proj",
            "workload": {"kind": "sft"},
        },
        "ppo_groups": {
            "micro_batch": 4,
            "grad_accum": 2,
            "zero_stage": 2,
            "gpus_per_node": 8,
            "workload": {"kind": "ppo", **RL, "roles": {"placement": "actor+ref:4,critic:2,rollout:2"}},
        },
    },
}
MODULES = {"verl": verl_rl, "openrlhf": openrlhf}


def written(framework: str, case: str, folder: Path, **more):
    body = {**BASE, "framework": framework, **CASES[framework][case], **more}
    result = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = result.context
    files = launch.files(result.plan, hw, model, goal.seq_len, goal)
    d = folder / case
    d.mkdir(parents=True)
    for name, text in files.items():
        (d / name).write_text(text)
    (script,) = [name for name in files if name.endswith(".sh") and name != launch.LAUNCH_NAME]
    return result.plan, d / script


def test_verl_keys_carry_the_roles_and_the_split(tmp_path):
    plan, path = written("verl", "grpo_budget", tmp_path)
    keys = script_flags(path.read_text())
    a = "actor_rollout_ref."
    assert keys["algorithm.adv_estimator"] == "grpo" and keys[a + "rollout.n"] == "4"
    assert keys[a + "actor.ppo_mini_batch_size"] == str(plan.global_batch // 4)  # prompts: samples / n
    assert keys[a + "actor.use_dynamic_bsz"] == "true" and keys[a + "actor.ppo_max_token_len_per_gpu"] == "8192"
    assert (
        keys[a + "actor.fsdp_config.param_offload"] == "true" and keys[a + "rollout.tensor_model_parallel_size"] == "2"
    )
    assert "critic.model.path" not in keys  # GRPO has no critic


def test_verl_writes_the_log_prob_micro_batches_and_reads_them_back(tmp_path):
    """The old log-probs' and the reference's micro-batches are verl's own keys (planner.estimate.roles.logprob_rows):
    written as the plan holds them, the actor's micro-batch where it holds none, and read back."""
    rl = {"kind": "grpo", **RL, "roles": {"logprob_micro_batch": 8}}
    _, path = written("verl", "grpo_vlm", tmp_path, model="qwen2.5-1.5b", images=None, max_pixels=None, workload=rl)
    keys, a = script_flags(path.read_text()), "actor_rollout_ref."
    assert keys[a + "rollout.log_prob_micro_batch_size_per_gpu"] == "8"
    assert keys[a + "ref.log_prob_micro_batch_size_per_gpu"] == keys[a + "actor.ppo_micro_batch_size_per_gpu"] == "2"
    roles = intake.read([str(path)]).request["workload"]["roles"]
    assert (roles["logprob_micro_batch"], roles["ref_logprob_micro_batch"]) == (8, 2)


@pytest.mark.parametrize("targets,flag", [("q_proj,v_proj", "q_proj v_proj"), ("all-linear", None)])
def test_openrlhf_writes_lora_targets_by_name_and_reads_them_back(tmp_path, targets, flag):
    """OpenRLHF's --ds.lora.target_modules is nargs="*" with the string default all-linear: named modules are written
    space-separated and read back; all-linear is left to the default, and typed out it is refused in one line (PEFT
    gets ['all-linear'], a list it does not expand: NoMatchingPeftModuleError)."""
    _, path = written("openrlhf", "sft_lora", tmp_path, lora_targets=targets)
    text = path.read_text()
    assert (f"--ds.lora.target_modules {flag}" in text) if flag else "target_modules" not in text
    if flag:
        assert intake.read([str(path)]).request["lora_targets"] == targets
        return
    path.write_text(text.replace("--ds.lora.rank 8", "--ds.lora.rank 8 --ds.lora.target_modules all-linear"))
    with pytest.raises(BadInput, match="expands all-linear only as a string"):
        intake.read([str(path)])


def test_verl_writes_the_references_own_budget_and_reads_it_back(tmp_path):
    """A reference pass at its own token budget is verl's ref.log_prob_max_token_len_per_gpu, read back as it was."""
    roles = {"max_tokens_per_gpu": 4096, "logprob_max_tokens_per_gpu": 4096, "ref_logprob_max_tokens_per_gpu": 8192}
    rl = {"kind": "grpo", **RL, "roles": roles}
    _, path = written("verl", "grpo_vlm", tmp_path, model="qwen2.5-1.5b", images=None, max_pixels=None, workload=rl)
    keys = script_flags(path.read_text())
    assert keys["actor_rollout_ref.ref.log_prob_max_token_len_per_gpu"] == "8192"
    assert keys["actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"] == "4096"
    back = intake.read([str(path)]).request["workload"]["roles"]
    assert (back["logprob_max_tokens_per_gpu"], back["ref_logprob_max_tokens_per_gpu"]) == (4096, 8192)


def test_verl_writes_its_fused_head_and_reads_it_back(tmp_path):
    """A plan through verl's fused log-prob head (planner.estimate.role_heads.fused_*) says so in the script
    (actor_rollout_ref.model.use_fused_kernels=True), read back as the same field; a plan without it writes nothing
    (verl's default is off: model/hf_model.yaml:61)."""
    for fused in (True, False):
        rl = {"kind": "grpo", **RL, "roles": {"fused_kernels": fused}}
        _, path = written(
            "verl", "grpo_vlm", tmp_path / str(fused), model="qwen2.5-1.5b", images=None, max_pixels=None, workload=rl
        )
        keys = script_flags(path.read_text())
        assert keys.get("actor_rollout_ref.model.use_fused_kernels") == ("true" if fused else None)
        assert intake.read([str(path)]).request["workload"]["roles"]["fused_kernels"] is fused


@pytest.mark.parametrize("images", [1, 2])
def test_verl_writes_the_images_pixel_bounds_and_reads_them_back(tmp_path, images):
    """A Qwen2.5-VL GRPO plan's images at most 401,408 pixels (512 tokens; unwritten, the processor's 12,845,056 and
    16,384 tokens) are the processor's kwargs, and read back as the same images at the same tokens and split; two
    images a row are vLLM's limit too (+actor_rollout_ref.rollout.limit_images=2; unwritten, the script reads back as
    one image a row, 512 tokens), 1,024 tokens within the 1,024-token prompt."""
    plan, path = written("verl", "grpo_vlm", tmp_path, images=images)
    words = shlex.split(path.read_text().replace("\\\n", " "), comments=True)
    assert (
        "+data.mm_processor_kwargs.max_pixels=401408" in words and "+data.mm_processor_kwargs.min_pixels=3136" in words
    )
    limits = [w for w in words if "limit_images" in w]
    assert limits == ([] if images == 1 else ["+actor_rollout_ref.rollout.limit_images=2"])
    back = intake.read([str(path)]).request
    assert (back["images"], back["min_pixels"], back["max_pixels"]) == (images, 3136, 401408)
    checked = advise.check(advise.parse(advise.CheckRequest, {**back, "gpu": "h100"}))
    assert checked.context[2].image_tokens == 512 * images
    assert (checked.plan.micro_batch, checked.plan.grad_accum) == (2, 2)
    assert plan.launch.note is None or "pixel" not in plan.launch.note


def test_openrlhf_flags_place_each_role(tmp_path):
    _, path = written("openrlhf", "ppo_groups", tmp_path)
    words = shlex.split(path.read_text().replace("\\\n", " "), comments=True)
    text = " ".join(words)
    assert words[:3] == ["python3", "-m", "openrlhf.cli.train_ppo_ray"]
    assert "--actor.num_gpus_per_node 4 --ref.num_nodes 1 --ref.num_gpus_per_node 4 --train.colocate_actor_ref" in text
    assert "--critic.num_gpus_per_node 2" in text and "--vllm.num_engines 2" in text
    assert "--algo.advantage.estimator gae" in text and "--train.colocate_all" not in text


@pytest.mark.parametrize(
    "framework,roles,says",
    [
        ("verl", {"placement": "actor+ref+critic:6,rollout:2"}, "verl .*runs its roles on one GPU pool"),
        ("verl", {"sleep_level": 1}, "verl .*the hybrid engine sleeps at level 2"),
        ("openrlhf", {"sleep_level": 2}, "sleep at level 1"),
        ("openrlhf", {"placement": "actor+critic:4,ref:2,rollout:2"}, "actor\\+ref and critic\\+reward together"),
    ],
)
def test_what_the_framework_cannot_run_is_one_line(framework, roles, says):
    body = {
        **BASE,
        "framework": framework,
        "micro_batch": 2,
        "grad_accum": 2,
        **({"fsdp": "full"} if framework == "verl" else {"zero_stage": 2}),
        "workload": {"kind": "ppo", **RL, "roles": roles},
    }
    with pytest.raises(BadInput, match=says) as refused:  # the framework's rule, before any plan or file
        advise.check(advise.parse(advise.CheckRequest, body))
    assert "\n" not in str(refused.value) and refused.value.field in ("placement", "sleep_level")


# --- the frameworks' own config code -------------------------------------------------------------------------------

VARS = {"verl": "MEMPLAN_VERL_PYTHON", "openrlhf": "MEMPLAN_OPENRLHF_PYTHON"}
SCRIPT = {"verl": "verl_rl_validate.py", "openrlhf": "openrlhf_validate.py"}
BROKEN = {  # one misspelt key each: the framework's code must refuse it
    "verl": ("actor_rollout_ref.rollout.gpu_memory_utilization=", "actor_rollout_ref.rollout.gpu_memory_util="),
    "openrlhf": ("--vllm.gpu_memory_utilization", "--vllm.gpu_mem_utilisation"),
}


def validate(framework: str, paths: list[Path | str]) -> subprocess.CompletedProcess:
    python = os.environ.get(VARS[framework])
    if not python:
        pytest.skip(f"{VARS[framework]} is not set: the python of a venv with {framework} installed runs this check")
    return subprocess.run(
        [python, str(VALIDATORS / SCRIPT[framework]), *map(str, paths)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(paths[0]).parent,
    )


@pytest.mark.parametrize("framework", list(CASES))
def test_exports_pass_the_frameworks_own_config_code_and_a_misspelt_key_fails(framework, tmp_path):
    """Every case passes the framework's own config code, and a misspelt key fails it: one validator run (--each)."""
    written_ = [written(framework, case, tmp_path) for case in CASES[framework]]
    _, broken = written(framework, next(iter(CASES[framework])), tmp_path / "broken")
    good, bad = BROKEN[framework]
    assert good in broken.read_text()
    broken.write_text(broken.read_text().replace(good, bad))
    run = validate(framework, [*(p for _, p in written_), broken, "--each"])
    said = dict(line.split(": ", 1) for line in run.stdout.splitlines() if ": OK " in line or ": INVALID " in line)
    assert all(said[str(p)].startswith("OK ") for _, p in written_), run.stdout[-4000:] + run.stderr[-8000:]
    assert run.returncode == 1 and said[str(broken)].startswith("INVALID "), run.stdout[-2000:] + run.stderr[-2000:]
    ok = "\n".join(said[str(p)] for _, p in written_)
    if framework == "verl":
        assert "gae: roles actor+rollout+ref+critic+reward" in ok and "grpo: roles actor+rollout+ref," in ok
    else:
        assert "Policy 4 GPUs shared, Reference 4 GPUs shared, Critic 2 GPUs" in ok
        assert "dpo: micro 2, batch 32, zero 3" in ok  # train_dpo's own parser and checks
        assert "sft: max_len 2048, micro 2, batch 64, zero 2" in ok  # train_sft's (cli/train_sft.py)
