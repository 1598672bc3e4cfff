"""Issue 46: each LLaMA-Factory release line's range is exact. TAGS is every tag of github.com/hiyouga/LLaMA-Factory
from v0.5.0 (`git tag`), each with what decides its line, read at the tag (`git show TAG:PATH`): the values its
flash_attn takes (src/*/hparams/model_args.py: a bool through v0.6.3, off/sdpa/fa2/auto at v0.7.0-v0.8.2,
auto/disabled/sdpa/fa2 from v0.8.3, extras/constants.py AttentionFunction from v0.9.2) and whether it starts from
src/train_bash.py (through v0.7.0). Every tag's line names the tag in its source's range, every line's flash_attn
words are ones each of its tags takes, and the train_bash.py lines are the train_bash.py tags'. v0.7.0 (string
flash_attn under train_bash.py) was the 0.6 line's, whose bool flash_attn it refuses (v0.7.0 model/utils/attention.py
raises on any other value)."""

import re

import pytest

from planner.frameworks.llamafactory import FRAMEWORK, TRAIN_BASH
from planner.frameworks.llamafactory.keys import FLASH_ATTN, KEYS

BOOL = {True, False}
OFF = {"off", "sdpa", "fa2", "auto"}
DISABLED = {"auto", "disabled", "sdpa", "fa2"}
# tag -> (flash_attn's values, src/train_bash.py at the tag)
TAGS = {
    **{t: (BOOL, True) for t in ("v0.5.0", "v0.5.2", "v0.5.3", "v0.6.0", "v0.6.1", "v0.6.2", "v0.6.3")},
    "v0.7.0": (OFF, True),
    **{t: (OFF, False) for t in ("v0.7.1", "v0.8.0", "v0.8.1", "v0.8.2")},
    **{t: (DISABLED, False) for t in ("v0.8.3", "v0.9.0", "v0.9.1", "v0.9.2", "v0.9.3", "v0.9.4")},
    "v0.9.5": (DISABLED | {"fa3"}, False),
}
ORDER = list(TAGS)


def _range(source: str) -> list[str]:
    """The tags a line's source names: `vA .. vB`, else its one `vA`."""
    m = re.match(r"LLaMA-Factory (v[\d.]+)(?: \.\. (v[\d.]+))?", source)
    assert m, source
    first, last = m.group(1), m.group(2) or m.group(1)
    return ORDER[ORDER.index(first) : ORDER.index(last) + 1]


def _lines() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for tag in TAGS:
        out.setdefault(FRAMEWORK.release(tag).name, []).append(tag)
    return out


def test_every_line_is_the_tags_its_source_names():
    lines = _lines()
    assert set(lines) == {r.name for r in FRAMEWORK.releases}
    for r in FRAMEWORK.releases:
        assert lines[r.name] == _range(r.source), r.name


@pytest.mark.parametrize("line", [r.name for r in FRAMEWORK.releases])
def test_every_tag_of_a_line_takes_the_flash_attn_it_writes_and_its_entry_point(line):
    words = KEYS["attention"].values.get(line, FLASH_ATTN)
    for tag in _lines()[line]:
        takes, train_bash = TAGS[tag]
        assert set(words.values()) <= takes, (line, tag)
        assert (line in TRAIN_BASH) == train_bash, (line, tag)


def test_v0_7_0_is_a_line_of_its_own():
    assert FRAMEWORK.release("0.7.0").name == "0.7" and FRAMEWORK.release("0.6.3").name == "0.6"
    assert FRAMEWORK.release("0.7.1").name == "0.7.1"
