"""The router aux loss over a global batch (trainer/router.py) against transformers' own load_balancing_loss_func
on a real tiny Qwen3-MoE: equal on one micro-batch (value and router gradients), and additive over micro-batches
where transformers' per-forward loss is not."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from planner.model.catalog import load_model
from recipe import hf_config
from trainer.router import RouterAux

TOL = 1e-5  # relative, fp32 (sums in another order)


def tiny_moe(coef=0.3):
    torch.manual_seed(0)
    cfg = hf_config({**load_model("debug-moe").config, "output_router_logits": True, "router_aux_loss_coef": coef})
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")


def batch(lengths, width=24, vocab=8192):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, vocab, (len(lengths), width), generator=g)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    return ids * mask, mask


def router_grads(model):
    return torch.cat([m.weight.grad.flatten() for m in model.modules() if type(m).__name__.endswith("TopKRouter")])


def our_loss(model, aux, parts):
    """The global aux loss's micro-batch terms over `parts` (RouterAux.route's pass first), backpropagated; their sum."""

    def forward(batch):
        with torch.no_grad():
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])

    aux.route([{"input_ids": i, "attention_mask": m} for i, m in parts], forward, 1, "cpu")
    got = 0.0
    for ids, mask in parts:
        aux.record(True)
        model(input_ids=ids, attention_mask=mask)
        term = aux.term({"attention_mask": mask})
        term.backward()
        got += float(term)
    aux.record(False)
    return got


def test_one_micro_batch_is_transformers_aux_loss_with_its_gradient():
    model = tiny_moe()
    aux = RouterAux.maybe(model)
    assert aux is not None and aux.experts == 8 and aux.top_k == 2
    ids, mask = batch([24, 17, 9, 20])
    out = model(input_ids=ids, attention_mask=mask, output_router_logits=True)
    (aux.coef * out.aux_loss).backward()
    want, want_grad = float(out.aux_loss.detach()), router_grads(model).clone()
    assert want_grad.abs().sum() > 0
    model.zero_grad()
    got = our_loss(model, aux, [(ids, mask)])
    assert got == pytest.approx(aux.coef * want, rel=TOL)
    assert aux.value == pytest.approx(want, rel=TOL)
    # near-zero entries: fp32 sums in another order differ by a few ulps of the largest gradient (3.7e-9 of 0.011 on
    # an avx512 CPU, one thread, 2026-12-07), so the absolute floor is a millionth of that scale
    assert torch.allclose(router_grads(model), want_grad, rtol=TOL, atol=1e-6 * float(want_grad.abs().max()))


def test_micro_batch_terms_add_up_to_the_global_batch_where_per_forward_losses_do_not():
    model = tiny_moe()
    aux = RouterAux.maybe(model)
    ids, mask = batch([24, 5, 9, 20])
    whole = our_loss(model, aux, [(ids, mask)])
    whole_grad = router_grads(model).clone()
    model.zero_grad()
    split = our_loss(model, aux, [(ids[:1], mask[:1]), (ids[1:3, :9], mask[1:3, :9]), (ids[3:], mask[3:])])
    assert split == pytest.approx(whole, rel=TOL)
    assert torch.allclose(router_grads(model), whole_grad, rtol=1e-4, atol=1e-8)
    per_forward = [
        float(model(input_ids=i, attention_mask=m, output_router_logits=True).aux_loss)
        for i, m in ((ids[:2], mask[:2]), (ids[2:], mask[2:]))
    ]
    assert abs(sum(per_forward) / 2 / aux.value - 1) > 1e-3  # transformers' per-forward mean: not the batch's


def test_off_unless_the_config_turns_it_on():
    torch.manual_seed(0)
    off = transformers.AutoModelForCausalLM.from_config(hf_config(load_model("debug-moe").config))
    dense = transformers.AutoModelForCausalLM.from_config(hf_config(load_model("debug-llama").config))
    assert RouterAux.maybe(off) is None and RouterAux.maybe(dense) is None
