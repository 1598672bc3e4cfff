"""Issue 46: a release declares the attention it runs by default (its Default "attention"), and `suggest` naming no
attention tries it where every plan at the default list's sdpa is refused (planner.config.requests
Space.release_attention): LLaMA-Factory to v0.6.3 (flash_attn False: eager), OpenRLHF to 0.8.9 (--flash_attn off:
eager), torchtitan (flash). Every plan ranked is written in the release's own files; a request naming sdpa is still
refused in one line. The releases are read from the declarations, none named here."""

import re

import pytest

from planner import advise
from planner.errors import BadInput
from planner.export import launch
from planner.frameworks import FRAMEWORKS, adapter

# every framework release (and every framework without releases) declaring an attention other than sdpa
OWN = sorted(
    (name, r.name if r is not None else "")
    for name, fw in FRAMEWORKS.items()
    for r in (fw.releases or (None,))
    if getattr(adapter(name, r.name if r is not None else "").defaults.get("attention"), "value", "sdpa") != "sdpa"
)
MODEL = {"torchtitan": "llama-3.1-8b"}  # torchtitan trains the models it defines (planner.frameworks.torchtitan)
OWN_BATCHING = {"torchtitan": ["packed"]}  # what torchtitan alone runs


def _suggest(framework: str, release: str, **given):
    body = {
        "model": MODEL.get(framework, "qwen2.5-7b"),
        "gpu": "h100",
        "gpus_per_node": 8,
        "global_batch": 16,
        "seq_len": 2048,
        "framework": f"{framework}@{release}" if release else framework,
        "evidence": "analytic",
        "top": 3,
        **({"batching": OWN_BATCHING[framework]} if framework in OWN_BATCHING else {}),
        **given,
    }
    return advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)


def test_the_releases_declaring_their_own_attention_include_the_issue_s():
    assert {("llamafactory", "0.5"), ("llamafactory", "0.6"), ("openrlhf", "0.8")} <= set(OWN)


@pytest.mark.parametrize(("framework", "release"), OWN)
def test_suggest_ranks_plans_the_release_writes_at_its_own_attention(framework, release):
    """Ranked and written; or refused whole where the release writes nothing whatever the attention (verl 0.5's
    scripts are read, not written)."""
    declared = adapter(framework, release).defaults["attention"].value
    try:
        res = _suggest(framework, release)
    except BadInput as e:
        with pytest.raises(BadInput, match=re.escape(str(e))):
            _suggest(framework, release, attention=[declared])
        return
    assert res.plans, f"{framework}@{release}: nothing ranked"
    model, hw, goal = res.context
    for plan in res.plans:
        assert plan.knobs.attention in ("sdpa", declared)
        _command, files = launch.framework_launch(plan, model, hw, goal.seq_len)  # ValueError: not the line's files
        assert files


def test_llamafactory_to_0_6_3_writes_flash_attn_false_and_refuses_sdpa_asked():
    """v0.6.3 src/llmtuner/hparams/model_args.py:64-67 flash_attn a bool, False eager (model/patcher.py:64-76)."""
    for release in ("0.5", "0.6"):
        res = _suggest("llamafactory", release)
        model, hw, goal = res.context
        plan = res.plans[0]
        assert plan.knobs.attention == "eager"
        _command, files = launch.framework_launch(plan, model, hw, goal.seq_len)
        yaml = next(text for name, text in files.items() if name.endswith(".yaml"))
        assert "flash_attn: false" in yaml
        with pytest.raises(BadInput, match="flash_attn spells --attention flash, eager only"):
            _suggest("llamafactory", release, attention=["sdpa"])


def test_a_release_whose_sdpa_is_written_keeps_the_default():
    """LLaMA-Factory 0.7 (v0.7.0: flash_attn off/sdpa/fa2/auto, model_args.py:68-71) writes sdpa: the search's
    default stays sdpa, its plans unchanged by the release's own attention."""
    res = _suggest("llamafactory", "0.7")
    assert res.plans and {p.knobs.attention for p in res.plans} == {"sdpa"}
