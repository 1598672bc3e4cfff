"""The shape of a framework adapter, Framework, made of three parts each in its own module: what it runs
(planner.frameworks.runs: its knobs' values, defaults, keys, rules and refusals), how its files are read
(planner.frameworks.reading: its releases, tools, signs and forks) and what its memory means
(planner.frameworks.memory: log-prob heads, tower attention, FSDP, loop, RL roles, precision). This module joins them
and owns what takes all three: a release's adapter (Framework.at). Its names stay importable from here (the rule
predicates of planner.frameworks.rules too), so a framework's folder imports its shapes from one place."""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.frameworks.memory import Memory
from planner.frameworks.reading import MEANINGS, ForkSigns, Reading, Release
from planner.frameworks.rules import (
    NO_SPLITS,
    Rule,
    Where,
    autotp_rule,
    expert_targets,
    full_dpo_precomputed,
    kind,
    only_expert_targets,
    peft_fp8_quant,
    transformers_5_quant,
    workload_of,
)
from planner.frameworks.runs import KNOB_DEFAULTS, NEUTRAL, Default, Runs

__all__ = [
    "KNOB_DEFAULTS",
    "MEANINGS",
    "NEUTRAL",
    "NO_SPLITS",
    "Default",
    "ForkSigns",
    "Framework",
    "Release",
    "Rule",
    "Where",
    "autotp_rule",
    "expert_targets",
    "full_dpo_precomputed",
    "kind",
    "only_expert_targets",
    "peft_fp8_quant",
    "transformers_5_quant",
    "workload_of",
]


@dataclass(frozen=True)
class Framework(Memory, Reading, Runs):
    """A framework adapter: Runs' fields first (name, label, version, runs, ...), then Reading's, then Memory's; every
    adapter names them by keyword."""

    def at(self, text: str = "") -> Framework:
        """This adapter as the release `text` runs it: its defaults and keys merged over the newest's, `adapter`
        fields replaced and the line's own rules after the framework's (planner.frameworks.adapter caches it)."""
        r = self.release(text)
        if r is None or r is self.newest:
            return self
        rules = r.adapter.get("rules", self.rules) + r.rules
        return replace(
            self,
            defaults={**self.defaults, **r.defaults},
            keys={**self.keys, **r.keys},
            notes=self.notes + r.notes,
            **{**r.adapter, "rules": rules},
        )
