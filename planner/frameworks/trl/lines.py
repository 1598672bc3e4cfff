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
# split rule, as the search tries smaller generation batches per candidate (planner.search.search.generation_split)
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


def with_rules(releases: tuple[Release, ...], spans: dict, rules: tuple[Rule, ...]) -> tuple[Release, ...]:
    """`releases` with each line's own rules added to the framework's `rules` (Release.adapter) where it has any."""
    out = []
    for r in releases:
        extra = tuple(
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
