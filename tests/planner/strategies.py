"""Hypothesis strategies for every knob, made from the declaration (planner/config/knobfields.py): each knob's accepted
values or bounds, mostly valid and now and then hostile, one value or (for suggest's searched knobs) a short list.
A new knob is drawn by the property tests with no edit here."""

from hypothesis import strategies as st

from planner.config.knobfields import KNOBS, SEARCHED, choices, info, name_of

WORKLOADS = [
    {"kind": "sft"},
    {"kind": "dpo", "max_length": 256},
    {"kind": "grpo", "num_generations": 4, "max_prompt_length": 64, "max_completion_length": 64},
]
LORA_TARGETS = ["all-linear", "attention", "q_proj,v_proj", "o_proj"]
HOSTILE = st.one_of(
    st.none(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.just([]),
    st.just({}),
)


def mostly(valid, hostile=HOSTILE):
    """The hostile values about one time in 32, else the valid ones (as tests/planner/test_advise.py draws): a
    request has about 30 fields, so one in 16 left most requests with a hostile field."""
    return st.integers(0, 31).flatmap(lambda i: hostile if i == 7 else valid)


def valid_value(field: str):
    """The values the declaration accepts (bounded to sizes a search answers quickly)."""
    f, accepted = info(field), choices(field)
    if field == "workload":
        return st.sampled_from(WORKLOADS)
    if accepted:  # the default one time in two or more: each other value has rules, and two dozen knobs drawn
        # uniformly refuse most requests (the generated requests must reach both answers: test_advise.py)
        pool = list(accepted) + [f.default] * len(accepted) if f.default in accepted else list(accepted)
        return st.sampled_from(pool)
    if f.annotation is bool:  # True one time in four: each bool knob has rules, and together they would refuse most
        return st.sampled_from([False, False, False, True])
    bounds = {k: getattr(m, k) for m in f.metadata for k in ("ge", "le", "lt") if getattr(m, k, None) is not None}
    if f.annotation is int:
        return st.integers(bounds.get("ge", 0), min(bounds.get("le", 64), 64))
    if f.annotation is float:
        high = bounds.get("le", bounds.get("lt", 1.0))
        return st.floats(bounds.get("ge", 0.0), min(high, 8.0), exclude_max="lt" in bounds)
    return st.sampled_from(LORA_TARGETS)


def knob(field: str, many: bool = False):
    """One knob's request value: one value, or (many) a list of up to two to search."""
    valid = valid_value(field)
    if many:
        return mostly(st.lists(valid, min_size=1, max_size=2, unique=True), st.lists(HOSTILE, max_size=2))
    return mostly(valid)


def knob_fields(many: bool) -> dict:
    """Every knob by its request JSON name: the searched ones as lists when `many` (suggest), else one value."""
    return {name_of(f): knob(f, many and f in SEARCHED) for f in KNOBS}
