"""What TRL's older release lines have no GRPOConfig key for: the GRPO settings whose key (GRPO_SPANS) not every
version of a line takes become rules of that line, so `suggest` never ranks a plan the line's files cannot say and
the export refuses it in one line (planner.export.export.trl_args writes each key only when a plan has the setting).
vllm_mode came in v0.18.0: before it TRL's vLLM ran on GPUs of its own (vllm_device), so a server plan writes
use_vllm alone there and a colocated one has no key."""

from __future__ import annotations

from dataclasses import replace

from planner.frameworks.base import Release, Rule, workload_of
from planner.frameworks.keys import whole_line


def _grpo(k: dict, name: str, default: object) -> object:
    w = workload_of(k)
    return default if w is None or w.kind != "grpo" else getattr(w, name)


# (GRPOConfig key, the setting as its flag, whether the knobs have it, the rule's scope): steps_per_generation is a
# split rule, as the search tries smaller generation batches per candidate (planner.search.estimates.generation_split)
NEEDS = (
    ("num_iterations", "--num-iterations above 1", lambda k: _grpo(k, "num_iterations", 1) != 1, "knobs"),
    (
        "steps_per_generation",
        "--steps-per-generation",
        lambda k, where=None: _grpo(k, "steps_per_generation", None) is not None,
        "split",
    ),
    ("vllm_mode", "--generation vllm-colocate", lambda k: _grpo(k, "generation", "hf") == "vllm-colocate", "knobs"),
)


# HF's Trainer runs accelerate's FSDP2 from transformers 4.51.0 (trainer.py:2317 is_fsdp2; none at 4.49.0 or 4.50.0),
# accelerate has it from 1.6.0 (v1.5.0 utils/dataclasses.py has no fsdp_version); these lines ran the transformers and
# accelerate of their time (tools/fwenv_old.sh: trl 0.14.0 with 4.48.2 and 1.3.0, 0.15.2 with 4.49.0 and 1.4.0; R1-V a
# 4.49.0.dev0 commit, VLM-R1 setup.py:65 transformers==4.49.0), so an FSDP run there is FSDP1 whatever is written
NO_FSDP2 = ("0.14", "0.15", "r1-v", "vlm-r1")


def fsdp1_only(r: Release) -> tuple[Rule, ...]:
    """The rule of scope "written" of a line in NO_FSDP2: `suggest` never ranks an FSDP plan the line's files would
    run as FSDP1 (memplan writes and plans FSDP2: planner.export.export.fsdp_config); a user's FSDP file is still read."""
    if r.name not in NO_FSDP2:
        return ()
    why = (
        f"release {r.name} runs a transformers before 4.51.0 and an accelerate before 1.6.0, whose Trainer builds FSDP1 "
        "only, and the FSDP written is FSDP2's: give --zero N or a later release"
    )
    return (Rule("fsdp", why, lambda k, w: k.get("fsdp", "off") != "off", "written"),)


# HSDP at the 0.19 line (trl 0.19.1 on transformers 4.53.1) runs with accelerate >= 1.10.1, which the written
# requirements pin (planner.frameworks.hf.launchenv ACCELERATE_HSDP; the line's month ran 1.8.1, whose fully_shard takes
# no mesh): its Trainer builds the Accelerator with no parallelism_config (transformers 4.53.1 trainer.py:5191-5208) and
# accelerate 1.10.1 builds it from the variables (accelerator.py:454-459): as HF's own 4 line (planner.frameworks.hf)


def with_fsdp1_only(releases: tuple[Release, ...]) -> tuple[Release, ...]:
    """`releases` (TRL's forks, whose adapters carry their own rules) with fsdp1_only added where it applies."""
    return tuple(
        replace(r, adapter={**r.adapter, "rules": (*r.adapter.get("rules", ()), *fsdp1_only(r))})
        if fsdp1_only(r)
        else r
        for r in releases
    )


def with_rules(releases: tuple[Release, ...], spans: dict, rules: tuple[Rule, ...]) -> tuple[Release, ...]:
    """`releases` with each line's own rules added to the framework's `rules` (Release.adapter) where it has any."""
    out = []
    for r in releases:
        extra = fsdp1_only(r) + tuple(
            Rule(
                "workload",
                f"release {r.name}'s GRPOConfig has no {key} for {setting} (from "
                f"v{'.'.join(map(str, spans[key][0]))}): give a later release",
                test,
                scope,
            )
            for key, setting, test, scope in NEEDS
            if r.first is not None and not whole_line(releases, spans, key, r.name)
        )
        out.append(replace(r, adapter={**r.adapter, "rules": rules + extra}) if extra else r)
    return tuple(out)
