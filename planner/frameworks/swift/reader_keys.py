"""Which `swift sft|rlhf` flags the release line a reading targets takes, each one it does not (or takes and memplan
does not read) a note in that line's words: ms-swift 4.6.0's (presets/keys_swift.txt), and for each 3.x line those
its tags take that 4.6.0 does not ("only") and 4.6.0's that none of its tags takes ("gone"), in
presets/keys_swift_lines.json (tools/swift_line_keys.py: TrainArguments' and RLHFArguments' fields at every tag of
the line, from the syntax tree, with transformers' of the line's venv; guard: tests/planner/frameworks/swift/
test_line_defaults.py, each venv's own dataclasses.fields). The 2 line's own names (SftArguments' and its
subclasses', v2.0.0 .. v2.6.1) are checked before 2.x's are read as 4.x's (reader_2.translate: takes)."""

from __future__ import annotations

import json
from functools import cache

from planner.frameworks.swift.keys import KEYS
from planner.intake.collect import PRESETS, SWIFT, Collector, accepted
from planner.intake.flags import Flag

# a 3.x line's own name of a flag memplan reads under 4.x's: GRPO's vLLM tensor parallel size is --tensor_parallel_size
# to v3.4.x (v3.3.0 swift/trainers/arguments.py:170; v3.4.1 :176, rlhf_trainer/grpo_trainer.py:494 builds the engine
# with it), a deprecated alias of --vllm_tensor_parallel_size from v3.5.0 (arguments.py:189, 217), joined by
# --gpu_memory_utilization from v3.7.0 (v3.7.3 arguments.py:179-191 _handle_compatibility; v3.9.0 :216-218); 3.0-3.2's
# --use_liger, 3.3's --use_liger_kernel (v3.2.2 swift/llm/argument/tuner_args.py:200; v3.3.0 swift/trainers/
# arguments.py:52), which reader_3x.liger checks
TP = ("vllm_tensor_parallel_size", "v3.4.1 swift/trainers/arguments.py:176; v3.7.3 :179-191")
UTIL = ("vllm_gpu_memory_utilization", "v3.7.3 swift/trainers/arguments.py:179-191; v3.9.0 :216-218")
LIGER = ("use_liger_kernel", "v3.2.2 swift/llm/argument/tuner_args.py:200; tuner.py:338-340 apply_liger")
ALIASES = {
    "3": {"tensor_parallel_size": TP, "use_liger": LIGER},
    "3.4": {"tensor_parallel_size": TP},
    "3.7": {"tensor_parallel_size": TP, "gpu_memory_utilization": UTIL},
    "3.9": {"tensor_parallel_size": TP, "gpu_memory_utilization": UTIL},
}


def aliased(f: dict[str, Flag], line: str) -> dict[str, Flag]:
    """`f` with line `line`'s own names of a flag memplan reads (ALIASES) as 4.x's, where 4.x's is not given too."""
    out = dict(f)
    for old, (new, cite) in ALIASES.get(line, {}).items():
        if old in out and new not in out:
            flag = out.pop(old)
            out[new] = Flag(new, flag.value, f"{flag.source} (ms-swift {line}'s name of --{new}: {cite})", flag.raw)
    return out


LINES_HELD = ("2", "3", "3.4", "3.7", "3.9")  # the lines presets/keys_swift_lines.json holds (tools/swift_line_keys.py)


@cache
def _lines() -> dict[str, dict[str, frozenset[str]]]:
    table = json.loads((PRESETS / "keys_swift_lines.json").read_text())
    return {line: {k: frozenset(v) for k, v in keys.items()} for line, keys in table.items()}


def takes(line: str, key: str) -> bool:
    """Whether some tag of release line `line` (one the table holds: 2.x or 3.x) takes flag `key`, in its own name."""
    own = _lines()[line]
    return key in own["only"] or (key in accepted("swift") and key not in own["gone"])


def note_unknown(c: Collector, f: dict[str, Flag], line: str, skip: set[str]) -> None:
    """A note for each flag in `f` (less `skip`) release line `line` does not take ("not an ms-swift 3.4 argument:
    swift refuses it"), or takes where 4.6.0 does not and memplan reads no meaning of ("an ms-swift 3.4 argument,
    not planned"); at a line the table does not hold (2, after translate; 4), 4.6.0's keys decide."""
    own = _lines().get(line)
    if own is None or line == "2":  # 2.x's own names: reader_2.translate
        for k in sorted(set(f) - accepted("swift") - skip):
            c.note(f"{f[k].source} (not an {SWIFT} argument: swift refuses it)")
        return
    aliases = ALIASES.get(line, {})
    for k in sorted(set(f) - skip - {KEYS.key("lora", "3")}):
        if f[k].raw.lstrip("-").replace("-", "_") in aliases:  # the line's own name, read as 4.x's (aliased)
            continue
        if k in own["only"]:
            c.note(f"{f[k].source} (an ms-swift {line} argument, not planned)")
        elif k in own["gone"] or k not in accepted("swift"):
            c.note(f"{f[k].source} (not an ms-swift {line} argument: swift refuses it)")
