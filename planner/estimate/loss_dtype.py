"""Whether a plan takes the model's own loss in its logits' dtype (Traits.half_loss): the framework's line decides,
by the newest transformers it pins (Framework.transformers_newest). Read by the training step's loss
(temp_terms.logits_loss_bytes) and the evaluation forward's (nograd.eval_head_bytes)."""

from __future__ import annotations

from planner.estimate.setup import Setup
from planner.frameworks import FRAMEWORKS, adapter


def half_loss(s: Setup) -> bool:
    """The model's class computes its loss in the logits' dtype at every transformers the framework's line may run
    (Traits.half_loss [first, gone) holds the line's newest pin, Framework.transformers_newest; the first is the
    class's own first release, so the line's older pins cannot build it); an unsaid pin plans HF's fp32 loss."""
    span, k = s.model.text.traits.half_loss, s.knobs
    if not span or k.framework not in FRAMEWORKS:
        return False
    newest = adapter(k.framework, k.release).transformers_newest
    return bool(newest) and span[0] <= newest < span[1]
