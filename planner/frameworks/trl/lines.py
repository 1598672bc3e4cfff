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


# the 0.19 line ran the accelerate of its month (tools/fwenv_old.sh: trl 0.19.1 with transformers 4.53.1 and
# accelerate 1.8.1), which has no ParallelismConfig (v1.8.1 has no parallelism_config.py; from v1.10.0): FSDP2's
# fully_shard gets no mesh and shards over every rank (utils/fsdp_utils.py:615-659), so HSDP as written (a 2-D mesh:
# planner.export.parallel.hsdp_fields) runs as a full shard over the world; HF's own 4 line the same
# (planner.frameworks.hf HSDP_4)
NO_MESH = ("0.19",)


def hsdp_unmeshed(r: Release) -> tuple[Rule, ...]:
    """The rule of scope "written" of a line in NO_MESH: `suggest` never ranks an HSDP plan there."""
    if r.name not in NO_MESH:
        return ()
    why = (
        f"release {r.name} runs accelerate 1.8, which builds no replicate x shard mesh (ParallelismConfig from 1.10; "
        "1.8.1 utils/fsdp_utils.py:615-659 shards over every rank): give --fsdp full or a later release"
    )
    return (Rule("fsdp", why, lambda k, w: k.get("fsdp", "off") == "hybrid", "written"),)


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
        extra = (
            fsdp1_only(r)
            + hsdp_unmeshed(r)
            + tuple(
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
        )
        out.append(replace(r, adapter={**r.adapter, "rules": rules + extra}) if extra else r)
    return tuple(out)
