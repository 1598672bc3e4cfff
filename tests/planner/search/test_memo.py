"""One estimate per configuration within a request (planner.search.memo): the nearest settings' searches and a check's
alternatives re-plan what the request planned; each configuration is estimated once, and the answer is the one made
without the memo."""

from planner import advise
from planner.search import estimates, memo

NOTHING_FITS = {"model": "llama-3.1-70b", "gpu": "rtx4090", "global_batch": 256, "seq_len": 8192, "top": 5}


def _counted(monkeypatch) -> list:
    """The (model, GPU, world, goal, knobs, micro-batch) of every estimate made, and whether a memo was open."""
    made, real = [], estimates.new_plan

    def counted(model, hw, goal, knobs, micro_batch, *rest):
        key = (model.name, hw.model_dump_json(), goal.model_dump_json(), knobs, micro_batch)
        made.append((key, memo.active() is not None))
        return real(model, hw, goal, knobs, micro_batch, *rest)

    monkeypatch.setattr(estimates, "new_plan", counted)
    return made


def test_a_request_estimates_each_configuration_once(monkeypatch):
    made = _counted(monkeypatch)
    result = advise.suggest(advise.parse(advise.SuggestRequest, NOTHING_FITS))
    keys = [k for k, _ in made]
    assert not result.plans and result.nearest  # the nearest settings' searches ran
    assert len(keys) == len(set(keys)), len(keys) - len(set(keys))
    assert all(opened for _, opened in made)
    assert memo.active() is None  # closed with the request

    made.clear()
    monkeypatch.setattr(memo, "active", lambda: None)
    again = advise.suggest(advise.parse(advise.SuggestRequest, NOTHING_FITS))
    assert len(made) > len(keys)  # without it the same configurations are estimated again (1,944 for 1,159)
    assert again.model_dump() == result.model_dump()


def test_a_check_shares_its_estimates_with_its_alternatives(monkeypatch):
    made = _counted(monkeypatch)
    req = {"model": "llama-3.1-8b", "gpu": "a100-80gb", "gpus_per_node": 8, "seq_len": 4096, "micro_batch": 8}
    out = advise.check(advise.parse(advise.CheckRequest, {**req, "grad_accum": 4, "zero": 2}))
    keys = [k for k, _ in made]
    assert out.plan.fits is not None and len(keys) == len(set(keys))
