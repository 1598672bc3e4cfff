"""A plan's predicted step time by kind (planner.estimate.speed.StepTime as JSON carries it), and what each of its
micro-steps pays again: the part of the step that grows with the accumulation at one global batch."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


def _seconds(x: float) -> float:
    return round(x, 6)


class PerMicroStep(BaseModel):
    """Seconds one micro-step pays beyond its tokens' FLOPs (each is also inside the step's own kind)."""

    model_config = ConfigDict(defer_build=True)

    fixed_s: float = Field(description="of compute: the efficiency curve's fixed share (launches, the loop's sync)")
    collectives_s: float = Field(description="of communication: the exposed collectives run on every micro-step")
    offload_s: float = Field(description="of offload: ZeRO-3 parameter offload's copies")

    @property
    def total_s(self) -> float:
        return self.fixed_s + self.collectives_s + self.offload_s


class StepBreakdown(BaseModel):
    """Seconds of one optimizer step by kind (their sum is the plan's step_time_s), and the per-micro-step part."""

    model_config = ConfigDict(defer_build=True)

    compute_s: float
    communication_s: float
    offload_s: float
    generation_s: float = 0.0
    micro_steps: int
    per_micro_step: PerMicroStep

    @classmethod
    def of(cls, t) -> StepBreakdown:
        """From a planner.estimate.speed.StepTime, rounded as plans state seconds."""
        micro = PerMicroStep(
            fixed_s=_seconds(t.micro_fixed_s),
            collectives_s=_seconds(t.micro_comm_s),
            offload_s=_seconds(t.micro_offload_s),
        )
        return cls(
            compute_s=_seconds(t.compute_s),
            communication_s=_seconds(t.comm_s),
            offload_s=_seconds(t.offload_s),
            generation_s=_seconds(t.generation_s),
            micro_steps=t.micro_steps,
            per_micro_step=micro,
        )
