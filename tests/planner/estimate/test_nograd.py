"""planner.estimate.nograd's no-grad passes: a VLM tower's moment under the masked 3-D SDPA of transformers
4.45-4.50 (the N x N terms pinned to torch in tests/probes/test_masked_tower.py)."""

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate import generation, nograd
from planner.estimate.setup import Setup
from planner.estimate.vision import encoder_tokens, masked_tower_bytes
from planner.model.catalog import load_model


def _grpo(release: str, attention: str = "sdpa", accum: int = 1) -> Setup:
    w = Workload(kind="grpo", max_prompt_length=2048, max_completion_length=1024)
    if release == "3":  # the 3 line's reading: trl 0.16's generation per micro-step
        w = w.model_copy(update={"steps_per_generation": 1})
    knobs = Knobs(precision="bf16", attention=attention, framework="swift", release=release, workload=w)
    return Setup(load_model("qwen2.5-vl-3b"), knobs, 8, accum, w.seq_len(), 4, 1, image_tokens=768)


def test_a_no_grad_pass_holds_the_masked_towers_scores_over_every_image_of_its_rows():
    """ms-swift 3.0-3.3's transformers run the tower's SDPA on 3-D tensors over one mask of the call's patches: a
    generation prefill or a reference pass of 8 rows of one 768-token image holds 67 bytes a pair of their 24,576
    patches; the 3.7 line's transformers (and flash attention) do not."""
    old, new = _grpo("3"), _grpo("3.7")
    patches = 8 * encoder_tokens(old.model.vision, 768)
    scores = masked_tower_bytes(old.model.vision, patches, "half", trained=False)
    assert patches == 24576 and scores == 67 * patches * patches
    assert nograd.masked_tower(old) and not nograd.masked_tower(new)
    v, embeds = old.model.vision, 2 * 8 * 768 * old.model.text.hidden  # the merged image embeddings, both lines
    assert nograd.nograd_vision_bytes(old, 8) == 3 * 2 * patches * v.hidden + scores + embeds  # the stream beside
    assert nograd.nograd_vision_bytes(new, 8) < scores // 50
    assert nograd.nograd_forward_bytes(old, 8, 2048) >= scores
    assert not nograd.masked_tower(_grpo("3", attention="flash"))


def test_the_3_4_lines_generation_runs_the_tower_over_the_ranks_whole_accumulated_batch():
    """ms-swift 3.4.0-3.6.4 sample the rank's micro-batch x accumulation rows at once (trl 0.17's dataloader, one
    PtEngine call with no batch limit) under 3.3.x's transformers (<4.53, 4.49-4.50's masked 3-D tower SDPA read the
    hungrier way); 3.0-3.3 sample per micro-step (trl 0.16). At 8 x 4 rows of one 768-token image: 98,304 patches,
    67 bytes a pair, 603 GiB in the prefill, against 37.9 GiB over 3.3's 8 rows (24,576 patches)."""
    per_step, whole = (
        generation.generation_terms(_grpo("3", accum=4)),
        generation.generation_terms(_grpo("3.4", accum=4)),
    )
    v = _grpo("3.4").model.vision
    n = 4 * 8 * encoder_tokens(v, 768)
    assert n == 98304 and nograd.masked_tower(_grpo("3.4"))
    assert whole["generation_tower_bytes"] >= masked_tower_bytes(v, n, "half", trained=False) == 67 * n * n
    assert per_step["generation_tower_bytes"] < 67 * (n // 4) ** 2 * 1.05
    assert 602 * 2**30 < 67 * n * n < 604 * 2**30


def test_an_eager_no_grad_pass_holds_one_layers_softmax_moment():
    """glm-4-9b-chat's reference pass in OpenRLHF's DPO (chosen and rejected, 2 rows of 2048) without flash attention:
    10 bytes a score in bf16 (the scores, their fp32 copy, the fp32 softmax; measured in
    tests/probes/test_eager_nograd.py), 2.5 GiB over 32 heads; none under SDPA or flash attention."""
    from dataclasses import replace

    m = load_model("glm-4-9b-chat")
    eager = Setup(replace(m, text=replace(m.text, attention="eager")), Knobs(precision="bf16"), 1, 1, 2048)
    sdpa = Setup(m, Knobs(precision="bf16"), 1, 1, 2048)
    scores = 10 * 2 * 32 * 2048 * 2048
    assert nograd.eager_scores_nograd_bytes(eager, 2, 2048) == scores
    assert nograd.eager_scores_nograd_bytes(sdpa, 2, 2048) == 0
    # the layer's moment is attention's now, where SDPA's was the MLP's (about 0.2 GiB of it)
    assert nograd.nograd_forward_bytes(eager, 2, 2048) - nograd.nograd_forward_bytes(sdpa, 2, 2048) > 0.9 * scores


def test_a_no_grad_pass_runs_the_plans_attention_not_the_models_default():
    """The --attention knob reaches the reference, old-policy, generation and evaluation passes as it reaches training
    (recipe_terms.text_spec): eager's scores counted where the plan runs eager on a model whose default is SDPA
    (before stop 69 they were 0 there: an under-count), and flash's passes build no 4-D mask nor SDPA's bias."""
    model = load_model("qwen2.5-0.5b")
    assert model.text.attention == "sdpa"
    knobs = {a: Knobs(precision="bf16", attention=a) for a in ("sdpa", "eager", "flash")}
    s = {a: Setup(model, k, 2, 1, 1024) for a, k in knobs.items()}
    t = model.text
    assert nograd.eager_scores_nograd_bytes(s["eager"], 2, 1024) == 2 * t.heads * 1024 * 1024 * (2 + 4 + 4)
    assert nograd.eager_scores_nograd_bytes(s["sdpa"], 2, 1024) == 0
    assert nograd.planned_text(s["flash"]).attention == "flash" and nograd.planned_text(s["sdpa"]) is t
    forward = {a: nograd.nograd_forward_bytes(x, 2, 1024) for a, x in s.items()}
    assert forward["flash"] < forward["sdpa"] < forward["eager"]
