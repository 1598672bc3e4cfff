"""planner.search.role_advice.pass_fix: a log-prob pass's fixes as the plan's framework sizes it (the fields it reads:
the plan's framework and its roles)."""

from types import SimpleNamespace

import pytest

from planner.config.roles import Roles
from planner.search.role_advice import pass_fix


def _plan(framework: str, **roles) -> SimpleNamespace:
    return SimpleNamespace(framework=framework, workload=SimpleNamespace(roles=Roles(**roles)))


@pytest.mark.parametrize(
    "framework,term,roles,fix",
    [
        ("verl", "actor_old_logps", {}, "a smaller --logprob-max-tokens-per-gpu, or verl's fused log-prob head"),
        ("verl", "ref_reference_forward", {}, "a smaller --ref-logprob-max-tokens-per-gpu, or verl's fused"),
        ("verl", "actor_old_logps", {"fused_kernels": True}, "a smaller --logprob-max-tokens-per-gpu"),
        ("openrlhf", "ref_reference_forward", {}, "a smaller --logprob-max-tokens-per-gpu"),
    ],
)
def test_a_pass_is_fixed_in_its_frameworks_sizes(framework, term, roles, fix):
    got = pass_fix(_plan(framework, **roles), term)
    assert got.startswith(fix)
    assert ("fused" in got) == ("fused" in fix)


def test_other_terms_keep_their_fixes():
    assert pass_fix(_plan("verl"), "actor_update") is None
