"""The `zero_buckets` knob's text: zero_optimization values a DeepSpeed config sets itself, in DeepSpeed's own key
names (`reduce_bucket_size=500000000,overlap_comm=false`); "" is what memplan exports (planner.estimate.zero: HF's
"auto" resolution of the three sizes it fills, DeepSpeed's defaults of the rest, overlap_comm on).

The keys are DeepSpeed 0.19.8's DeepSpeedZeroConfig fields that decide memory or the buckets' count
(deepspeed/runtime/zero/config.py:102 contiguous_gradients, :113 reduce_bucket_size, :132 allgather_bucket_size,
:138 overlap_comm, :182 sub_group_size, :222 stage3_prefetch_bucket_size, :228 stage3_param_persistence_threshold,
:245 stage3_max_live_parameters, :251 stage3_max_reuse_distance), each by the name a JSON gives it (the stage3_
aliases); the value is the field of planner.estimate.zero.ZeroSettings it sets. `stage=N` (what a JSON's
zero_optimization.stage says) keeps the values to plans at that stage: a plan at another stage (a suggestion that
changes it) is written a JSON of its own, with memplan's values (applied)."""

from __future__ import annotations

# DeepSpeed key -> planner.estimate.zero.ZeroSettings field
KEYS = {
    "reduce_bucket_size": "reduce_bucket_size",
    "allgather_bucket_size": "allgather_bucket_size",
    "stage3_prefetch_bucket_size": "prefetch_bucket_size",
    "stage3_param_persistence_threshold": "param_persistence_threshold",
    "stage3_max_live_parameters": "max_live_parameters",
    "stage3_max_reuse_distance": "max_reuse_distance",
    "sub_group_size": "sub_group_size",
    "overlap_comm": "overlap_comm",
    "contiguous_gradients": "contiguous_gradients",
}
SWITCHES = ("overlap_comm", "contiguous_gradients")  # true / false; the rest are element counts
# each key's reach: the stages whose memory or buckets it decides (stage3_*, sub_group_size: ZeRO-3 only;
# allgather_bucket_size: ZeRO-1/2's all-gather of the updated parameters; overlap_comm: ZeRO-1/2's second reduce
# buffer, stage_1_and_2.py:3272-3277, where ZeRO-3 keeps one whatever it says, stage3.py:780-784)
STAGES = {k: (3,) if k.startswith("stage3_") or k == "sub_group_size" else (1, 2, 3) for k in KEYS}
STAGES.update(allgather_bucket_size=(1, 2), overlap_comm=(1, 2))
MAX = 10**13


def parse(text: str) -> dict[str, int | bool]:
    """{DeepSpeed key: value} of the knob's text; ValueError (one line, naming the bad part and what is accepted)."""
    out: dict[str, int | bool] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, raw = part.partition("=")
        if not eq or (key not in KEYS and key != "stage"):
            raise ValueError(f"--zero-buckets {part!r}: give KEY=VALUE with KEY stage or one of {', '.join(KEYS)}")
        out[key] = _value(key, raw.strip())
    return out


def applied(text: str, stage: int) -> dict[str, int | bool]:
    """{DeepSpeed key: value} the knob's text sets for a plan at ZeRO `stage`: none where it names another stage."""
    values = parse(text)
    if values.pop("stage", stage) != stage:
        return {}
    return values


def _value(key: str, raw: str) -> int | bool:
    if key == "stage":
        if raw not in ("0", "1", "2", "3"):
            raise ValueError(f"--zero-buckets stage={raw}: give 0, 1, 2 or 3")
        return int(raw)
    if key in SWITCHES:
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"--zero-buckets {key}={raw}: give true or false")
        return raw.lower() == "true"
    try:
        number = float(raw)
    except ValueError:
        number = -1.0
    if not (0 <= number <= MAX) or number != int(number) or (key == "reduce_bucket_size" and number == 0):
        raise ValueError(f"--zero-buckets {key}={raw}: give a whole number of elements, 0 .. 1e13 (5e8 is accepted)")
    return int(number)


def canonical(values: dict[str, int | bool]) -> str:
    """The knob's text for `values`: keys in KEYS' order, whole numbers, true/false."""
    shown = {k: (str(v).lower() if isinstance(v, bool) else str(int(v))) for k, v in values.items()}
    return ",".join(f"{k}={shown[k]}" for k in ("stage", *KEYS) if k in shown)
