"""The optimizer stepped inside backward (--optimizer-in-backward) as the probes and the bundled trainer run it:
one optimizer per parameter, stepped by a hook as its gradient completes (torchtune's optimizer_in_bwd)."""

from __future__ import annotations

import torch


class InBackward(torch.optim.Optimizer):
    """One optimizer per parameter, stepped by a hook the moment its gradient is complete, which then frees the
    gradient (torchtune's optimizer_in_bwd). To the trainer it is one optimizer whose step() has nothing left to
    do: its param_groups are the per-parameter optimizers' own (a scheduler moves their lr) and its state dict
    holds theirs, in parameter order (checkpoints)."""

    def __init__(self, params: list, optimizer: str, lr: float = 1e-5) -> None:
        from recipe import make_optimizer

        self.opts = [make_optimizer([p], optimizer, lr) for p in params]
        self.param_groups = [g for o in self.opts for g in o.param_groups]
        self.defaults, self.state = self.opts[0].defaults if self.opts else {}, {}
        self._optimizer_step_pre_hooks, self._optimizer_step_post_hooks = {}, {}
        self.handles = [p.register_post_accumulate_grad_hook(self._hook(o)) for p, o in zip(params, self.opts)]

    @staticmethod
    def _hook(opt):
        def step(p):
            opt.step()
            p.grad = None

        return step

    def step(self, closure=None):  # every parameter was stepped in backward
        return None

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.opts:
            o.zero_grad(set_to_none=True)

    def state_dict(self) -> dict:
        return {"per_parameter": [o.state_dict() for o in self.opts]}

    def load_state_dict(self, state: dict) -> None:
        for o, s in zip(self.opts, state["per_parameter"], strict=True):
            o.load_state_dict(s)
