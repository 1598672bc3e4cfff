"""Check verl 0.9.1 RL launch scripts (`python3 -m verl.trainer.main_ppo key=value ...`) with verl's own config code,
offline: no model download, no GPU, no Ray.

Usage: python verl_rl_validate.py A.sh [B.sh ...]   (the python of a venv with verl==0.9.1, or 0.6.x: tools/fwenv_old.sh)

For each script:
1. shlex splits it (continuations joined, comments dropped); the command must be `python3 -m verl.trainer.main_ppo`
   followed by Hydra overrides;
2. Hydra composes verl's ppo_trainer.yaml with them (what main_ppo's @hydra.main does): an unknown key (struct mode),
   a bad override or a wrong type fails the file; the critic's and reward model's paths point at a tiny local model
   (HFModelConfig reads config.json when the critic's config is built);
3. verl's validate_config with the roles verl derives itself (trainer/ppo/utils.py need_reference_policy,
   need_critic: utils/config.py:88-217, what main_ppo runs before Ray starts, trainer/main_ppo.py:176-181);
4. the sections become verl's dataclasses (omega_conf_to_dataclass: the actor's, the rollout's, the critic's
   __post_init__ checks, workers/config/actor.py:195-242, critic.py:103-129);
5. the mini-batch split verl asserts only at run time: ppo_mini_batch_size x rollout.n over the data-parallel ranks
   (workers/engine_workers.py:266-270), and the rollout's tensor-parallel size dividing the world (:655-661).
Prints what it read (estimator, roles, mini-batch per rank, rollout memory) per file; exits 1 at the first bad one.
"""

import os
import shlex
import sys
import tempfile
from pathlib import Path

from verdict import verdicts

os.environ.setdefault("WANDB_MODE", "disabled")
ENTRY = "verl.trainer.main_ppo"
# the reward model's path: reward.reward_model.model_path from 0.7, reward_model.model.path at 0.6
PATH_KEYS = ("critic.model.path", "reward.reward_model.model_path", "reward_model.model.path")


def overrides_of(path: Path) -> list[str]:
    toks = shlex.split(path.read_text().replace("\\\n", " "), comments=True)
    if toks[:3] != ["python3", "-m", ENTRY]:
        raise ValueError(f"not `python3 -m {ENTRY}`: {toks[:3]}")
    return toks[3:]


def tiny_model(folder: Path) -> str:
    from transformers import Qwen2Config

    Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(folder)
    return str(folder)


def compose(overrides: list[str]):
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra_files import parse_each_file_once

    parse_each_file_once()
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides)


def _critic_loads_tokenizer() -> bool:
    """0.7+'s critic model config loads the tokenizer unless told not to (load_tokenizer); 0.6.x's
    (workers/config/critic.py FSDPCriticModelCfg) takes no such key and loads none when its config is built."""
    from importlib.metadata import version

    from packaging.version import Version

    return Version(version("verl")) >= Version("0.7")


def check(path: Path, tiny: str) -> str:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    given = overrides_of(path)
    local = [o if o.split("=", 1)[0].lstrip("+") not in PATH_KEYS else f"{o.split('=', 1)[0]}={tiny}" for o in given]
    if any(o.startswith("critic.model.path=") for o in local) and _critic_loads_tokenizer():
        local.append("+critic.model.load_tokenizer=false")
    cfg = compose(local)
    ref, critic = need_reference_policy(cfg), need_critic(cfg)
    validate_config(cfg, use_reference_policy=ref, use_critic=critic)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    if critic:
        omega_conf_to_dataclass(cfg.critic)
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    mini = cfg.actor_rollout_ref.actor.ppo_mini_batch_size * cfg.actor_rollout_ref.rollout.n
    if mini % world:
        raise AssertionError(f"ppo_mini_batch_size x rollout.n = {mini} is not divisible by {world} ranks")
    if world % rollout.tensor_model_parallel_size:
        raise AssertionError(
            f"rollout tensor_model_parallel_size {rollout.tensor_model_parallel_size} must divide {world}"
        )
    roles = ["actor", "rollout"] + (["ref"] if ref else []) + (["critic"] if critic else [])
    roles += ["reward"] if (cfg.reward.reward_model if "reward" in cfg else cfg.reward_model).enable else []
    return (
        f"{cfg.algorithm.adv_estimator}: roles {'+'.join(roles)}, mini-batch {mini // world} per rank, micro "
        f"{actor.ppo_micro_batch_size_per_gpu}, rollout {rollout.name} at {rollout.gpu_memory_utilization} "
        f"tp {rollout.tensor_model_parallel_size}"
    )


def main(paths: list[str]) -> int:
    with tempfile.TemporaryDirectory() as d:
        tiny = tiny_model(Path(d) / "tiny")
        return verdicts(paths, lambda p: check(p, tiny))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
