"""MM-Eureka (github.com/ModalMinds/MM-EUREKA, its default branch `qwen` at bccddd7, 2025-04-04), a release of
OpenRLHF that froze v0.6.1: its own `openrlhf/` package (setup.py: "A Ray-based High-performance MultiModal RLHF
framework based on OpenRLHF"; requirements.txt: transformers==4.49.0, deepspeed==0.16.4, vllm 0.7.3), launched as
`python3 -m openrlhf.cli.train_ppo_ray` (examples/scripts/train_mm_eureka_qwen_7b_*.sh). Its cli/train_ppo_ray.py is
OpenRLHF v0.6.1's line for line (`diff` against the v0.6.1 tag: 24 lines, all below) but for its own flags:
- --freeze_prefix (:340-346): the actor's parameters whose names start with a prefix take no gradient
  (trainer/ray/ppo_actor.py:318-329); its scripts freeze `visual`, Qwen2.5-VL's tower and merger;
- --max_pixels / --min_pixels (:348-349, 640 x 28 x 28 and 4 x 28 x 28): each image's pixel bounds, on the processor
  (models/lmm_kits/utils.py:16-18) and vLLM's (trainer/ppo_utils/experience_maker.py:904-909);
- --drop_maxlen (:347), --enable_accuracy_filter, --freezing_filter_steps, --accuracy_lower_bound / _upper_bound
  (:425-428, experience_maker.py:240), --use_dapo, --use_adora, --adora_lamda (:431-433): which samples train and the
  loss's clipping, no memory of their own; --label_key's default "answer" (:398, v0.6.1 None).
Its defaults are v0.6.1's, the flat 0.8 line's values (--micro_train_batch_size 4, --bf16 and --flash_attn off), cited
here at MM-Eureka's own file. The flags only it takes (SIGNS), or its filter flags (FILTER, its internvl branch's
too) with --freeze_prefix, which that branch does not take, name it (planner.frameworks.openrlhf.reader_flags)."""

from planner.frameworks.base import Default, Release, Rule

WHO = "MM-EUREKA bccddd7"
CLI = f"{WHO} openrlhf/cli/train_ppo_ray.py"
# flags no OpenRLHF release takes (v0.6.1 .. 0.11.2 cli/train_ppo_ray.py have none of them), nor MM-Eureka's internvl
# branch, nor LMM-R1 -> the qwen branch's line (OpenRLHF-M takes the first three: openrlhfm.SIGNS, reader_flags)
SIGNS = {
    "drop_maxlen": 347,
    "max_pixels": 348,
    "min_pixels": 349,
    "use_dapo": 431,
    "use_adora": 432,
    "adora_lamda": 433,
}
# flags the internvl branch takes too (planner.frameworks.openrlhf.mmeureka_internvl): the qwen branch assumed
FILTER = {
    "enable_accuracy_filter": 425,
    "freezing_filter_steps": 426,
    "accuracy_lower_bound": 427,
    "accuracy_upper_bound": 428,
}
# its own pixel bounds: flag -> (default, line)
PIXELS = {"max_pixels": (640 * 28 * 28, 348), "min_pixels": (4 * 28 * 28, 349)}
# memplan's writer writes OpenRLHF's own entry point (writer.py); MM-Eureka's package and its image dataset are the
# user's checkout: its runs are read and planned, never written


# the flags whose defaults the forks' copies keep from the flat line (OpenRLHF 0.6.1's and 0.7.3's argparse)
FLAT = {
    "micro_batch": (4, "--micro_train_batch_size 4"),
    "attention": ("eager", "--flash_attn off: eager"),
    "precision": ("fp32", "--bf16 off: fp32 (utils/deepspeed/deepspeed_utils.py)"),
    "rollout_micro_batch": (8, "--micro_rollout_batch_size 8"),
    "workload.max_prompt_length": (1024, "--prompt_max_len 1024"),
    "workload.max_completion_length": (1024, "--generate_max_len 1024"),
}


def read_only(who: str, base: str) -> Rule:
    """A fork's rule refusing every plan for writing (`who`'s launch scripts are read; `base` the OpenRLHF release
    whose flags it froze)."""
    return Rule(
        "release",
        f"{who}'s launch scripts are read, not written (its own openrlhf/ package, OpenRLHF {base}'s flags): give "
        "--framework openrlhf for a script of OpenRLHF's",
        lambda k, w: True,
        "written",
    )


READ_ONLY = read_only("MM-Eureka", "0.6.1")


def fork_release(
    name: str,
    cli: str,
    what: str,
    lines: dict[str, int],
    note: str,
    ro: Rule,
    parts: tuple,
    frozen: tuple[str, ...] = ("none", "vision+projector"),
) -> Release:
    """A multimodal fork's read-only release (`ro` refuses it whole first): its FLAT defaults cited at `cli`:`lines`,
    `parts` the flat line's (keys, rules, runs), its adapter running `runs` with the modules it may freeze."""
    keys, rules, runs = parts
    return Release(
        name,
        None,
        f"{cli} ({what})",
        defaults={k: Default(v, f"{cli}:{lines[k]} {text}") for k, (v, text) in FLAT.items()},
        keys=keys,
        notes=(note,),
        adapter={"runs": {**runs, "frozen": frozen}},
        rules=(ro, *rules),
    )


def mm_eureka(keys: dict[str, str], rules: tuple, runs: dict) -> Release:
    """MM-Eureka's release: OpenRLHF 0.6.1's flat `keys` and the 0.8 line's `rules` (its flags are that line's), its
    adapter running OpenRLHF's `runs` with the vision tower and merger frozen too (--freeze_prefix visual)."""
    return fork_release(
        "mm-eureka",
        CLI,
        "OpenRLHF v0.6.1's with multimodal rollouts and its own flags: :340-349, :425-433",
        dict(zip(FLAT, (312, 273, 267, 299, 301, 302))),
        "MM-Eureka: OpenRLHF 0.6.1's flat flags, --bf16 and --flash_attn switches, images within --max_pixels",
        READ_ONLY,
        (keys, rules, runs),
    )
