"""The PEFT a framework line runs, and what LoRA's "all linear" reaches in an MoE model there (transformers 5's stacked
experts), which both the PEFT release and the framework's way of naming the targets decide.

A line on transformers 5 runs its newest PEFT pin (Framework.peft_newest: LLaMA-Factory 0.9.5's 0.18.1, ms-swift 4's
and axolotl 0.19's 0.20.0), else PEFT 0.22.0 (hf, TRL, verl, OpenRLHF, memplan's trainer: what a fresh install takes,
constraints.txt); a line on transformers 4 0.21.2, the newest before 0.22, where its experts and router are nn.Linear
modules every all-linear reaches (reached). --peft-release names another (VERSIONS).

All linear in an MoE decoder, on transformers 5 (measured with each framework's own finder and LoraConfig in its own
venv, r 8, tiny configs: probes/moe_reach.py, tests/probes/test_moe.py):
- PEFT's own "all-linear" (Framework.all_linear_names False): from 0.20 PEFT maps the v4 expert names of the families
  transformers converts (peft/utils/transformers_weight_conversion.py, _MODEL_TO_CONVERSION_PATTERN; the families:
  planner.model.moespec.PEFT_MAPS, MoESpec.peft_maps_from) onto the stacked experts and the router (target_parameters, gate-up at twice the rank). 0.20-0.21 then leave out every MLP linear
  sharing those names (DeepSeek's and GLM-4.5's dense first layers and shared experts); 0.22.0 keeps them and adds
  Qwen2-MoE's own family (:44-46). Before 0.20 no expert is adapted.
- A framework's own list of nn.Linear leaf names (LLaMA-Factory find_all_linear_modules, ms-swift find_all_linears,
  axolotl find_all_linear_names: Framework.all_linear_names): the list names gate_proj/up_proj/down_proj only where
  the model has an MLP nn.Linear (a dense layer or a shared expert), and then PEFT 0.20-0.21 map them onto the
  experts and drop them as modules (DeepSeek, GLM-4.5: attention and experts alone); no router, whose transformers 5
  class is no nn.Linear. PEFT 0.18.1 (LLaMA-Factory) maps nothing: every MLP linear, and DeepSeek-V2's router, an
  nn.Linear in its transformers 5.6 (modeling_deepseek_v2.py:90).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

PEFT_0_22 = (0, 22, 0)
BEFORE_0_22 = (0, 21, 2)  # the release memplan measured before 0.22.0 (verl's and OpenRLHF's venvs hold it)
MAPS_EXPERTS = (0, 20, 0)  # the first PEFT measured mapping expert names (ms-swift's and axolotl's 0.20.0)


# the releases --peft-release names (Knobs.peft_release), each measured (tests/probes/test_moe_reach.py)
VERSIONS = {"0.18": (0, 18, 1), "0.20": (0, 20, 0), "0.21": BEFORE_0_22, "0.22": PEFT_0_22}


def peft_of(framework: str, release: str, asked: str = "line") -> tuple[int, ...]:
    """The PEFT release the line `framework`@`release` runs (above), or the one `asked` (--peft-release)."""
    if asked in VERSIONS:
        return VERSIONS[asked]
    from planner.frameworks import adapter
    from planner.frameworks.rules import runs_transformers_5

    if not runs_transformers_5(framework, release):
        return BEFORE_0_22
    return adapter(framework, release).peft_newest or PEFT_0_22


def _multiple(t, moe, version: tuple[int, ...], names: bool, has_mlp: bool) -> int:
    """The rank multiple all linear gives an MoE tensor (moe_part mlp | router | experts) at PEFT `version`; `moe`
    (MoESpec) says from which PEFT the family's experts are mapped and whether its router was an nn.Linear."""
    # a VLM's language model (moe.pattern): memplan's pattern is mapped as a list of its names; a framework's own
    # VLM list was not measured (no expert, as planned before)
    mapped = bool(moe.peft_maps_from) and version >= moe.peft_maps_from and not (moe.pattern and names)
    names = names or moe.pattern
    if names:  # the framework's list reaches the experts only through an MLP linear's names
        mapped = mapped and has_mlp
    router = mapped and not names or (names and version < MAPS_EXPERTS and moe.router_linear_5_6)
    experts = 2 if t.name.endswith("gate_up_proj") else 1
    part = {"mlp": not (mapped and version < PEFT_0_22), "router": router, "experts": mapped}[t.moe_part]
    return (experts if t.moe_part == "experts" else 1) * int(part)


def reached_at(tensors, moe, version: tuple[int, ...], names: bool) -> tuple:
    """`tensors` with their MoE parts' all-linear multiples at PEFT `version` (`names`: the framework's own list)."""
    has_mlp = any(t.moe_part == "mlp" for t in tensors)
    return tuple(
        replace(t, all_linear=_multiple(t, moe, version, names, has_mlp)) if t.moe_part else t for t in tensors
    )


@lru_cache(maxsize=256)  # a pure function of hashable arguments, asked by every Setup of a LoRA plan
def reached(model, framework: str, release: str, asked: str = "line"):
    """`model` with its MoE tensors' all-linear multiples as the line's PEFT and target naming give them. A VLM's
    language model built as one (moespec.moe_mlp's vlm: a pattern that no PEFT maps) carries no moe_part and stays as
    built; GLM-4.5V's and Qwen3-Omni's carry MoESpec.pattern (moespec.PATTERN_MAPS)."""
    if model.text.moe is None or not any(t.moe_part for t in model.tensors):
        return model
    from planner.frameworks import adapter
    from planner.frameworks.rules import runs_transformers_5

    if asked == "line" and not runs_transformers_5(framework, release):
        # transformers 4 builds each expert's projections and the router as nn.Linear modules: any all-linear (PEFT's
        # or a framework's list) reaches them all, as PEFT 0.22's own all-linear reaches the stacked ones
        version, names = PEFT_0_22, False
    else:
        version, names = peft_of(framework, release, asked), adapter(framework, release).all_linear_names
    tensors = reached_at(model.tensors, model.text.moe, version, names)
    return model if tensors == tuple(model.tensors) else replace(model, tensors=tensors)
