"""OpenRLHF's attention by release line (planner/frameworks/openrlhf: the "0.8" line's --flash_attn switch, off by
default: eager; 0.8.10 on, --attn_implementation flash_attention_2): a flat script is read with the default of the
release its flags allow, not 0.11.2's, and where they allow both (--bf16 alone) both are planned."""

import subprocess
from pathlib import Path

import pytest

from planner import intake
from planner.frameworks import FRAMEWORKS

FIELD = Path(__file__).parents[3] / "field"
MIRROR = Path("/work/.mirror/OpenRLHF+OpenRLHF/repo")
DPO = "deepspeed --module openrlhf.cli.train_dpo --pretrain Qwen/Qwen2.5-7B-Instruct --bf16 --zero_stage 3 "


def _read(path: Path, **given) -> tuple[dict, object]:
    reading = intake.read([str(path)], given=given or None)
    return {s.field: s for s in reading.settings}, reading


def test_a_flash_attn_switch_names_the_08_line_and_is_read_as_flash(tmp_path):
    script = tmp_path / "dpo.sh"
    script.write_text(DPO + "--flash_attn\n")
    s, reading = _read(script)
    assert s["framework"].value == "openrlhf@0.8" and "0.8.9 and before" in s["framework"].source
    assert s["attention"].value == "flash" and s["attention"].source.endswith("--flash_attn")
    assert reading.releases == ("0.5", "0.8")  # the switch allows 0.8.9 and before: the 0.5 line takes 0.8's flags


def test_openrlhf_384s_script_without_the_switch_allows_08_and_09_and_08_reads_eager():
    """#384: --bf16 and no attention flag: 0.8.9 and before (eager unless --flash_attn; 0.5.0 .. 0.5.3 the 0.5 line)
    or 0.8.10 .. 0.9.x (flash)."""
    script = FIELD / "openrlhf-384-glm4-9b-dpo-z3-8xa100" / "train_dpo.sh"
    s, reading = _read(script)
    assert set(reading.releases) == {"0.5", "0.8", "0.9"} and s["framework"].value == "openrlhf@0.9"
    assert s["attention"].value == "flash"
    old, _ = _read(script, framework="openrlhf@0.8")
    assert old["attention"].value == "eager" and "openrlhf@0.8" in old["attention"].source
    assert "v0.8.9 cli/train_ppo_ray.py:282" in old["attention"].source


def test_a_flat_attn_implementation_names_the_09_line_and_its_value_is_read(tmp_path):
    script = tmp_path / "dpo.sh"
    script.write_text(DPO + "--attn_implementation eager\n")
    s, reading = _read(script)
    assert s["framework"].value == "openrlhf@0.9" and not reading.releases
    assert s["attention"].value == "eager" and "--attn_implementation eager" in s["attention"].source


def test_a_pinned_version_inside_the_08_line_is_planned_there(tmp_path):
    (tmp_path / "requirements.txt").write_text("openrlhf==0.5.7\n")
    script = tmp_path / "dpo.sh"
    script.write_text(DPO + "\n")
    s, reading = _read(script)
    assert s["framework"].value == "openrlhf@0.8" and s["attention"].value == "eager" and not reading.releases
    assert FRAMEWORKS["openrlhf"].release("0.8.10").name == "0.9"  # 0.8.10 took --attn_implementation


@pytest.mark.skipif(not MIRROR.exists(), reason="OpenRLHF's git history is not on this machine")
@pytest.mark.parametrize(
    ("tag", "line", "words"),
    [
        ("v0.8.9", 282, ('"--flash_attn"', "default=False")),
        ("v0.5.0", 234, ('"--flash_attn"', "default=False")),
        ("v0.8.10", 283, ('"--attn_implementation"',)),
        ("v0.8.10", 285, ('default="flash_attention_2"',)),
    ],
)
def test_the_cited_lines_say_so_at_their_tags(tag, line, words):
    text = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"{tag}:openrlhf/cli/train_ppo_ray.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[line - 1]
    assert all(w in text for w in words), (tag, line, text)
