"""The bounds the fastest-first search prunes with hold on every micro-batch they stand for: no micro-batch of a knob
family is faster than its speed bound (ranked.speed_bound), and none of a family ruled out by its model states
(ranked.cannot_fit) fits. Checked on the families real searches bound, for requests hypothesis draws (the suggest
property test's), each micro-batch estimated in full."""

import pytest
from hypothesis import HealthCheck, given, settings

from planner import advise
from planner.errors import BadInput
from planner.search import estimates, ranked
from tests.planner.test_advise import EXAMPLES, suggest_requests


def _bounded(data: dict, monkeypatch) -> tuple[list, list]:
    """(speed bounds, model-state verdicts) the search made for one request, with their arguments."""
    speeds, states = [], []
    real_speed, real_fit = ranked.speed_bound, ranked.cannot_fit

    def speed_bound(*args):
        speeds.append((args, real_speed(*args)))
        return speeds[-1][1]

    def cannot_fit(*args):
        states.append((args, real_fit(*args)))
        return states[-1][1]

    monkeypatch.setattr(ranked, "speed_bound", speed_bound)
    monkeypatch.setattr(ranked, "cannot_fit", cannot_fit)
    try:
        advise.suggest(advise.parse(advise.SuggestRequest, data), rejected="never")
    except BadInput:
        pass
    return speeds, states


def _check(speeds: list, states: list) -> None:
    for (model, hw, goal, knobs, sizes), bound in speeds:
        for mb in sizes if bound is not None else ():
            fastest = ranked.speed_of(ranked.setup_of(model, hw, goal, knobs, mb), hw)[1]
            assert fastest <= bound, (knobs, mb, fastest, bound)
    for (model, hw, goal, knobs, _, calibrate), hopeless in states:
        per_rank = goal.global_batch // knobs.data_parallel_of(hw.world_size)
        for mb in ranked.divisors(per_rank) if hopeless else ():
            if knobs.optimizer_in_backward and mb != per_rank:
                continue  # no such split: the optimizer steps in backward only without accumulation (spec.Plan)
            assert not estimates.new_plan(model, hw, goal, knobs, mb, calibrate).fits, (knobs, mb)


@settings(max_examples=max(20, EXAMPLES // 40), deadline=None, suppress_health_check=list(HealthCheck))
@given(suggest_requests)
def test_no_micro_batch_passes_its_familys_bounds(data):
    with pytest.MonkeyPatch.context() as mp:
        speeds, states = _bounded(data, mp)
    _check(speeds, states)


def test_the_readme_example_prunes_families_by_both_bounds(monkeypatch):
    """The README's first example: some families are ruled out by their model states alone (DDP's: 16 bytes a
    parameter of Llama-3.1-8B on an 80 GB card), some never expanded (their bound below the top 5), and both bounds
    hold on every micro-batch of them."""
    req = {"model": "llama-3.1-8b", "gpu": "a100-80gb", "gpus_per_node": 8, "global_batch": 256, "seq_len": 4096}
    expanded = []
    real = ranked.Family.expand
    monkeypatch.setattr(ranked.Family, "expand", lambda self, *a: expanded.append(self) or real(self, *a))
    speeds, states = _bounded({**req, "top": 5}, monkeypatch)
    hopeless = [a for a, h in states if h]
    assert hopeless and all(a[3].zero_stage == 0 and a[3].fsdp == "off" and a[3].offload == "none" for a in hopeless)
    assert 0 < len([e for e in expanded if not e.hopeless]) < len(speeds)
    _check(speeds, states)
