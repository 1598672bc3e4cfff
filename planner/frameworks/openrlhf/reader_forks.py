"""Where each multimodal fork of OpenRLHF runs what planner.frameworks.openrlhf.reader_mmeureka reads (LINES, one
Line a release: MM-Eureka's two branches, LMM-R1's main and dev, OpenRLHF-M), the model types each fork's actor loads
(LOADS) and the other release to name where it loads none of them (OTHER). Each cite is that fork's file at its commit
(planner.frameworks.openrlhf.mmeureka, .mmeureka_internvl, .lmmr1, .lmmr1_dev, .openrlhfm)."""

from __future__ import annotations

from typing import NamedTuple

from planner.frameworks.openrlhf import lmmr1, lmmr1_dev, openrlhfm
from planner.frameworks.openrlhf import mmeureka_internvl as internvl
from planner.frameworks.openrlhf.mmeureka import PIXELS, WHO
from planner.frameworks.trl import reader_vlmr1 as vlmr1

EXPERIENCE = "openrlhf/trainer/ppo_utils/experience_maker.py"
CLI = "openrlhf/cli/train_ppo_ray.py"
BUFFER = "openrlhf/trainer/ppo_utils/replay_buffer.py remove_padding_in_sequences"
ACTOR = "trainer/ray/ppo_actor.py"
HELD = "requires_grad False before DeepSpeed wraps the actor"


class Line(NamedTuple):
    """One fork's copy of these: its name and commit, its images (vlmr1.Fork), where its experience rows are padded
    (`pad`), the default of --micro_rollout_batch_size, where its actor freezes, where vLLM's max_model_len is set,
    where the replay buffer unpads the rows the training passes take (`unpad`), and where --packing_samples packs
    its rows (`packed`: each sample its own length, kept so by the buffer; "" where the fork pads them anyway)."""

    who: str
    fork: vlmr1.Fork
    pad: str
    rollout: str
    freeze: str
    max_len: str
    unpad: str
    packed: str = ""


def _pixels(table: dict) -> dict:
    return {k: (v, f"{CLI}:{line}") for k, (v, line) in table.items()}


def _lmm_r1(who: str, at: dict, pixels: dict) -> Line:
    """LMM-R1's line at a branch (`at`: its lines there; its padding, images and buffer are the same code)."""
    return Line(
        who,
        vlmr1.Fork(
            "LMM-R1",
            who,
            _pixels(pixels),
            (1024, f"{CLI}:{at['prompt']} --prompt_max_len"),
            f"LMM-R1's vLLM rollout takes the whole prompt and its images, {EXPERIENCE}:{at['vllm']}",
            "one image a row, vLLM's limit where --limit_mm_per_prompt names none (vLLM 0.8.3 config.py:2551)",
        ),
        f"{EXPERIENCE}:{at['pad']}",
        f"{CLI}:{at['rollout']}",
        f"{ACTOR}:{at['freeze']}: {HELD}",
        "cli/train_ppo_ray.py:41, trainer/ray/vllm_engine.py:167",
        f"{BUFFER}:131-167, 208, padded again to a micro-batch's longest, :101-115",
    )


FREEZE = f"{ACTOR}:318-329: {HELD}"
LINES = {
    "mm-eureka": Line(
        WHO,
        vlmr1.Fork(
            "MM-Eureka",
            WHO,
            _pixels(PIXELS),
            (1024, f"{CLI}:301 --prompt_max_len"),
            f"MM-Eureka's vLLM rollout takes the whole prompt and its images, {EXPERIENCE}:897-911, 940-962",
            "one image a row, in its row's message (models/lmm_kits/base/data_processor.py:30-46)",
        ),
        f"{EXPERIENCE}:932-961, each --micro_rollout_batch_size rows",
        f"{CLI}:299",
        FREEZE,
        "cli/train_ppo_ray.py:75, trainer/ray/vllm_engine.py:173",
        f"{BUFFER}:134-170, 222-223, padded again to a micro-batch's longest, :103-120",
        f"{EXPERIENCE}:996-1004, replay_buffer.py:221-223",
    ),
    "lmm-r1": _lmm_r1(
        lmmr1.WHO,
        {"prompt": 295, "vllm": "676-691, 709-728", "pad": "709-728, the whole rollout batch, split at :270"}
        | {"rollout": 292, "freeze": "431-440"},
        lmmr1.PIXELS,
    ),
    # dev pads each --micro_rollout_batch_size group to its own longest (experience_maker.py:707-752)
    "lmm-r1-dev": _lmm_r1(
        lmmr1_dev.WHO,
        {"prompt": 296, "vllm": "679-694, 715-722", "pad": "707-752, each --micro_rollout_batch_size rows"}
        | {"rollout": 293, "freeze": "440-449"},
        lmmr1_dev.PIXELS,
    ),
    "mm-eureka-internvl": Line(
        internvl.WHO,
        vlmr1.Fork(
            "MM-Eureka (internvl branch)",
            internvl.WHO,
            {},
            (1024, f"{CLI}:303 --prompt_max_len"),
            f"its vLLM rollout takes the whole prompt and its images, {EXPERIENCE}:878-884, 927-963",
            "one image a row, as its data's image_urls (experience_maker.py:878-884)",
        ),
        f"{EXPERIENCE}:912-955, each --micro_rollout_batch_size rows",
        f"{CLI}:301",
        internvl.FREEZE,
        "cli/train_ppo_ray.py:73, trainer/ray/vllm_engine.py:186",
        f"{BUFFER}:158-201, 234, padded again to a micro-batch's longest, :126-143",
    ),
    # MM-Eureka's qwen branch's parent: the same rollout, buffer and freeze, at its own lines
    "openrlhf-m": Line(
        openrlhfm.WHO,
        vlmr1.Fork(
            "OpenRLHF-M",
            openrlhfm.WHO,
            _pixels(openrlhfm.PIXELS),
            (1024, f"{CLI}:301 --prompt_max_len"),
            f"OpenRLHF-M's vLLM rollout takes the whole prompt and its images, {EXPERIENCE}:833-847, 877-887",
            "one image a row, in its row's message (models/lmm_kits/base/data_processor.py:28-46)",
        ),
        f"{EXPERIENCE}:866-923, each --micro_rollout_batch_size rows",
        f"{CLI}:299",
        f"{ACTOR}:319-327: {HELD}",
        "cli/train_ppo_ray.py:75, trainer/ray/vllm_engine.py:172",
        f"{BUFFER}:131-167, 213-214, padded again to a micro-batch's longest, :102-128",
        f"{EXPERIENCE}:924-955, replay_buffer.py:213-214",
    ),
}

# the model types a fork's actor loads (LMM-R1 loads any: an unknown type falls to its `llm` kit, lmm_kits/utils.py:14-18)
LOADS = {
    "mm-eureka": (
        ("qwen2_5_vl",),
        "openrlhf/models/lmm_kits/utils.py:10, 33 imports the model_type's kit: qwen2_5_vl's alone",
    ),
    # OpenGVLab's checkpoints are internvl_chat; memplan's catalog holds their transformers-native config, internvl
    "mm-eureka-internvl": (("internvl_chat", "internvl"), "openrlhf/models/actor.py:79-86 loads InternVLChatModel"),
    "openrlhf-m": (
        ("qwen2_5_vl",),
        "openrlhf/models/actor.py:77-79, lmm_kits/utils.py:5-10, 34-42 import the model_type's kit: qwen2_5_vl's alone",
    ),
}
OTHER = {
    "mm-eureka": "openrlhf@mm-eureka-internvl for InternVL",
    "mm-eureka-internvl": "openrlhf@mm-eureka for Qwen2.5-VL",
    "openrlhf-m": "openrlhf@lmm-r1 for another model (its kits fall back to an LLM's)",
}
