"""The README never shows an output its command does not print now (docs/readme.py; `make docs` rewrites)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import readme


def test_every_pasted_output_is_what_its_command_prints():
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "readme.py"), "--check"], capture_output=True, text=True,
                       timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "README blocks match" in r.stdout


def test_the_check_fails_on_a_stale_block(tmp_path):
    stale = "text\n<!-- docs: planner gpus -->\n```\nGPU catalog: one made-up row\n```\nmore\n"
    new, changed = readme.rendered(stale, tmp_path)
    assert changed == ["planner gpus"] and "h100-80gb" in new and "made-up" not in new
    assert readme.rendered(new, tmp_path)[1] == []          # written once, it matches


def test_every_command_with_a_pasted_output_is_marked():
    """A planner command block followed directly by an output block has its marker (so no output escapes)."""
    text = (ROOT / "README.md").read_text()
    unmarked = [m.group(1) for m in __import__("re").finditer(r"```\n(planner [^\n]+)\n```\n```\n", text)]
    assert not unmarked, unmarked
    assert len(readme.MARKER.findall(text)) >= 8
