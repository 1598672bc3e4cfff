"""verl's Megatron engine, refused in one line wherever a run picks it: memplan plans verl's FSDP engine only (its
adapter: planner/frameworks/verl/__init__.py). verl v0.7.0 picks the worker by the strategy (trainer/main_ppo.py:148-156
for the actor, :170-184 for the critic); its config ppo_megatron_trainer.yaml:5 composes actor/megatron_actor.yaml
(:16 strategy: megatron, :7 its `megatron` engine section); the SFT engine trainer takes the engine group
`engine=megatron`."""

from __future__ import annotations

from planner.errors import BadInput
from planner.intake import hydra
from planner.intake.collect import one
from planner.intake.flags import Flag

CONFIG = "ppo_megatron_trainer"  # verl's own Megatron config (trainer/config/ppo_megatron_trainer.yaml)
STRATEGIES = (
    "actor_rollout_ref.actor.strategy",
    "critic.strategy",
    "engine.strategy",
    "engine",
    "actor_rollout_ref.actor.fsdp_config.strategy",
)
SECTIONS = ("actor_rollout_ref.actor.megatron.", "actor_rollout_ref.ref.megatron.", "critic.megatron.")
ACCEPTED = "accepted: verl's FSDP engine, strategy fsdp or fsdp2, config ppo_trainer"


def refuse_megatron(flags: dict[str, Flag], run=None) -> None:
    """BadInput where the run's config (none for a config file read alone) or a strategy key picks verl's Megatron
    engine."""
    name = hydra.options(run).get("--config-name", "").strip("'\"").removesuffix(".yaml") if run else ""
    if name == CONFIG:
        raise BadInput(f"{run.where} --config-name {name}: verl's Megatron engine is not planned ({ACCEPTED})", "fsdp")
    composed = flags.get("defaults")
    if composed is not None and CONFIG in map(str, composed.value or ()):
        raise BadInput(f"{composed.source}: verl's Megatron engine is not planned ({ACCEPTED})", "fsdp")
    # the Megatron engine's own section: actor/megatron_actor.yaml:7 `../engine@megatron: megatron` (dp_actor.yaml has
    # none, so Hydra takes these keys only over the Megatron actor)
    section = next((k for k in flags if k.startswith(SECTIONS) and flags[k].value not in (None, "null")), None)
    if section is not None:
        raise BadInput(f"{flags[section].source}: verl's Megatron engine is not planned ({ACCEPTED})", "fsdp")
    for key in STRATEGIES:
        if key in flags and str(one(flags[key].value)) == "megatron":
            raise BadInput(f"{flags[key].source}: verl's Megatron engine is not planned ({ACCEPTED})", "fsdp")
