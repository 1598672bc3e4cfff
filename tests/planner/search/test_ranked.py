"""The fastest-first search (planner.search.ranked) answers what the exhaustive walk answers: the same plans in the same
order, the same rejected families, the same bad input, for requests hypothesis draws (the suggest property test's)."""

import pytest
from hypothesis import HealthCheck, given, settings

from planner import advise
from planner.errors import BadInput
from planner.search import ranked
from tests.planner.test_advise import EXAMPLES, suggest_requests


def _answer(data: dict):
    try:
        result = advise.suggest(advise.parse(advise.SuggestRequest, data))
    except BadInput as e:
        return ("bad", str(e))
    return ([p.model_dump() for p in result.plans], [p.model_dump() for p in result.rejected])


@settings(max_examples=max(20, EXAMPLES // 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(suggest_requests)
def test_fastest_first_equals_the_exhaustive_walk(data):
    fast = _answer(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ranked, "deferrable", lambda *a: False)  # every micro-batch estimated, in order
        exhaustive = _answer(data)
    assert fast == exhaustive


def test_the_readme_example_estimates_fewer_candidates(monkeypatch):
    """The README's first example: the exhaustive walk's top 5 from a fifth fewer memory estimates (272 of 352 when
    written: every family's smallest micro-batch is estimated, to say which families fit at all)."""
    from planner.search import search

    calls = []
    real = search.make_plan
    monkeypatch.setattr(search, "make_plan", lambda *a, **k: calls.append(1) or real(*a, **k))
    req = dict(model="llama-3.1-8b", gpu="a100-80gb", gpus_per_node=8, global_batch=256, seq_len=4096, top=5)
    fast = _answer(req)
    n_fast = len(calls)
    monkeypatch.setattr(ranked, "deferrable", lambda *a: False)
    assert _answer(req) == fast
    assert n_fast <= 0.8 * (len(calls) - n_fast), (n_fast, len(calls) - n_fast)
