"""The router's auxiliary (load-balancing) loss of MoE models, over the whole global batch, for the bundled
trainer (trainer/step.py).

transformers adds `router_aux_loss_coef * load_balancing_loss_func(...)` (Switch Transformer, eqs. 4-6) to each
forward's loss when the config sets `output_router_logits`:

    aux = E * sum_i f_i * P_i,  f_i = (top-k picks of expert i) / rows,  P_i = (softmax mass of expert i) / rows

summed over every routed layer and every unpadded token of the forward (rows = layers x tokens). It is a
product of two batch means, so its value on a micro-batch is not a share of its value on the batch: summing
per-micro-batch terms would make the update depend on the split. Here the batch is the global batch, as for
the token loss. f is not differentiable (top-k), so the gradient is E * sum_i f_i dP_i, linear in each
micro-batch's P once f is known: a no-grad routing pass over the step's micro-batches (all ranks, one
all-reduce) gives the global f, and each micro-batch then adds E * sum_i f_i * S_i / rows, S_i its own softmax
mass. The micro-batch terms sum to the global batch's aux loss exactly; the price is one forward without
gradients per optimizer step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def router_class(model) -> type | None:
    """The module class transformers records `router_logits` from (its `_can_record_outputs`), or None."""
    for m in model.modules():
        rec = (getattr(m, "_can_record_outputs", None) or {}).get("router_logits")
        if rec is not None and getattr(rec, "target_class", None) is not None:
            return rec.target_class
    return None


class RouterAux:
    """Hooks on the model's routers that keep each forward's router logits, and the global-batch aux loss."""

    def __init__(self, model, router: type) -> None:
        cfg = model.config.get_text_config()
        self.coef = float(cfg.router_aux_loss_coef)
        self.experts = int(getattr(cfg, "num_local_experts", None) or cfg.num_experts)
        self.top_k = int(cfg.num_experts_per_tok)
        self.logits: list[torch.Tensor] = []
        self.recording = False
        self.fraction: torch.Tensor | None = None  # global f_i (picks of expert i / rows), this step
        self.rows = 1.0
        self.value = 0.0  # the global batch's aux loss, this step
        for m in model.modules():
            if isinstance(m, router):
                m.register_forward_hook(self._keep)

    @classmethod
    def maybe(cls, model) -> RouterAux | None:
        """A RouterAux where the config turns the aux loss on (an MoE config with output_router_logits and a
        nonzero router_aux_loss_coef), else None."""
        cfg = model.config.get_text_config()
        if not getattr(cfg, "output_router_logits", False) or not getattr(cfg, "router_aux_loss_coef", 0):
            return None
        router = router_class(model)
        return cls(model, router) if router is not None else None

    def _keep(self, _module, _inputs, output) -> None:
        if self.recording:  # not while backward recomputes a checkpointed layer
            self.logits.append(output[0] if isinstance(output, tuple) else output)

    def record(self, on: bool) -> None:
        self.recording = on
        self.logits = []

    def _layers(self, mask: torch.Tensor | None):
        """Each routed layer's (fp32 softmax, kept-token weights) for this forward: `mask` keeps the unpadded tokens
        (all without one)."""
        for logits in self.logits:
            probs = F.softmax(logits.float(), dim=-1)
            keep = (
                torch.ones(probs.shape[0], device=probs.device)
                if mask is None
                else mask.reshape(-1).to(probs.device, torch.float32)
            )
            yield probs, keep

    def mass(self, mask: torch.Tensor | None) -> torch.Tensor:
        """This forward's softmax mass per expert over its routed layers and kept tokens (with its gradient)."""
        return sum((probs * keep.unsqueeze(-1)).sum(0) for probs, keep in self._layers(mask))

    def sums(self, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """This forward's (picks per expert, softmax mass per expert, rows): transformers' load_balancing_loss_func
        before its division."""
        picks = torch.zeros(self.experts, dtype=torch.float64)
        rows = torch.zeros((), dtype=torch.float64)
        mass = 0
        for probs, keep in self._layers(mask):
            chosen = torch.topk(probs, self.top_k, dim=-1).indices
            picks += (
                torch.zeros(self.experts, device=probs.device)
                .scatter_add_(0, chosen.reshape(-1), keep.repeat_interleave(self.top_k))
                .double()
                .cpu()
            )
            rows += keep.sum().double().cpu()
            mass = mass + (probs * keep.unsqueeze(-1)).sum(0)
        return picks, mass, rows

    @staticmethod
    def mask(batch: dict) -> torch.Tensor | None:
        """The tokens a micro-batch routes for the aux loss: its attention mask (none for a packed row), or the
        all-zero `router_mask` of an empty micro-step's filler."""
        return batch.get("router_mask", batch.get("attention_mask"))

    def route(self, batches: list[dict], forward, world: int, device) -> None:
        """The step's routing pass: `forward(batch)` (no gradients) over its micro-batches, their picks, mass and rows
        summed over ranks (one all-reduce), then the global f for the micro-batch terms."""
        total = torch.zeros(2 * self.experts + 1, dtype=torch.float64)
        for batch in batches:
            if not batch["input_ids"].numel():
                continue
            self.record(True)
            forward(batch)
            picks, mass, rows = self.sums(self.mask(batch))
            self.record(False)
            total += torch.cat([picks, mass.detach().double().cpu(), rows.reshape(1)])
        if world > 1:
            import torch.distributed as dist

            total = total.to(device)
            dist.all_reduce(total)
            total = total.cpu()
        self.set_global(total[: self.experts], total[self.experts : -1], float(total[-1]))

    def set_global(self, picks: torch.Tensor, mass: torch.Tensor, rows: float) -> None:
        """The step's global picks and mass (summed over micro-batches and ranks) and its rows."""
        self.rows = max(rows, 1.0)
        self.fraction = picks / self.rows
        self.value = float(self.experts * (self.fraction * mass.double() / self.rows).sum())

    def term(self, batch: dict) -> torch.Tensor:
        """The coefficient times this micro-batch's share of the global aux loss (with its gradient): only its softmax
        mass is needed, the picks being the step's global ones."""
        mass = self.mass(self.mask(batch))
        f = self.fraction.to(mass.device, torch.float32)
        return self.coef * self.experts * (f * mass).sum() / self.rows
