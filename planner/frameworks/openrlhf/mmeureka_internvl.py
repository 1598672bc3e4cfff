"""MM-Eureka's `internvl` branch (github.com/ModalMinds/MM-EUREKA at 129fc9e, 2025-03-31), a release of OpenRLHF that
froze v0.6.0.post1 with InternVL's own model code (openrlhf/internvl/; requirements.txt: transformers==4.48.3,
deepspeed==0.16.3), launched as `python3 -m openrlhf.cli.train_ppo_ray` (examples/scripts/train_mm_eureka_8b_*.sh,
train_mm_eureka_zero_38b_multi_node.sh). Its cli/train_ppo_ray.py is v0.6.0.post1's (`diff` against the tag: 12 lines)
but for --repetition_penalty (:319, vLLM's sampling), the accuracy filter the qwen branch has too (:418-421, its bounds
0.0 and 1.0 by default), no --label_key, and four asserts that no critic is loaded (RLOO, GRPO, REINFORCE++ only).
Its trainer is not the qwen branch's: the actor is InternVLChatModel (models/actor.py:79-86) with its vision tower
frozen whatever the flags say (:87 freeze_params(self.model.vision_model); the MLP projector trains), no LoRA (:91
asserts it) and no 4-bit (:67); vLLM tiles each image by the checkpoint's max_dynamic_patch and hands the actor its
pixel_values (trainer/ray/vllm_engine.py:102-103), and takes the whole prompt (experience_maker.py:878-884, 927-963).
Defaults are v0.6.0.post1's, the flat 0.8 line's values, cited at its own file. Known by the flag only it takes
(SIGNS) or its reward functions' files (REWARD: examples/scripts/reward_func_internvl_instruct.py, _pretrain.py)
(planner.frameworks.openrlhf.reader_flags)."""

from __future__ import annotations

from planner.frameworks.base import Release
from planner.frameworks.openrlhf.mmeureka import FLAT, fork_release, read_only

WHO = "MM-EUREKA internvl@129fc9e"  # its branch and commit
CLI = f"{WHO} openrlhf/cli/train_ppo_ray.py"
SIGNS = {"repetition_penalty": 319}
# the filter flags both branches take (internvl :418-421, qwen :425-428)
SHARED = {
    "enable_accuracy_filter": 418,
    "freezing_filter_steps": 419,
    "accuracy_lower_bound": 420,
    "accuracy_upper_bound": 421,
}
REWARD = "reward_func_internvl_"
FREEZE = "openrlhf/models/actor.py:87, freeze_params on self.model.vision_model whatever the flags say"
READ_ONLY = read_only("MM-Eureka's internvl branch", "0.6.0.post1")


def mm_eureka_internvl(keys: dict[str, str], rules: tuple, runs: dict) -> Release:
    """The internvl branch's release: OpenRLHF 0.6.0.post1's flat `keys` and the 0.8 line's `rules`, its adapter
    running OpenRLHF's `runs` with the vision tower frozen (its actor always freezes it: the reading says so; a
    --frozen none given beside the files is the user's word)."""
    return fork_release(
        "mm-eureka-internvl",
        CLI,
        "OpenRLHF v0.6.0.post1's with InternVL's actor and its own flags: :319, :418-421",
        dict(zip(FLAT, (314, 275, 269, 301, 303, 304))),
        "MM-Eureka's internvl branch: OpenRLHF 0.6.0.post1's flat flags, InternVL with its vision tower frozen",
        READ_ONLY,
        (keys, rules, runs),
        frozen=("none", "vision"),
    )
