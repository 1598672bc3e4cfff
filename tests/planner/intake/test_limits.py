"""Issue 51 item 1: every reader of a user's configuration reads in bounded time and memory (planner/intake/limits.py).
Each hostile file is refused in one line naming the limit and the file, through the core (checkconfig.check_config) and the
CLI, each run in a child process under a 1.5 GiB address-space limit so that a blow-up fails the test instead of
swapping the machine, and a hang fails it at the timeout."""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.errors import BadInput
from planner.intake import limits
from planner.intake.collect import UNKNOWN
from planner.intake.shell import read_script
from tests.planner.cli.helpers import ROOT, one_line_error

MEMORY = 3 << 29  # 1.5 GiB of address space for each child
SECONDS = 5.0  # a generous bound: each case takes well under 1 s
RUN = "\ntorchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2\n"


def _bomb() -> str:
    """The 'billion laughs' in YAML: nine levels of nine aliases, under a key transformers' reader walks."""
    text = "a: &a [" + ",".join(['"lol"'] * 9) + "]\n"
    for name, prev in zip("bcdefgh", "abcdefg"):
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    return text + "report_to: [" + ",".join(["*h"] * 9) + "]\nper_device_train_batch_size: 1\n"


def _texts() -> dict[str, tuple[str, str]]:
    """{case: (the --config file's text, what its refusal says)}."""
    return {
        "power.sh": ("#!/bin/bash\nMB=$(( ((((9**64)**64)**64)**64)**64 ))" + RUN, "arithmetic result over 2**63"),
        "doubling.sh": ("#!/bin/bash\nA=x\n" + "A=$A$A\n" * 40 + RUN, "shell variable A's value over 64 KiB"),
        "bomb.yaml": (_bomb(), "YAML of over 20,000 nodes"),
        "loop.yaml": ("a: &a [*a]\nper_device_train_batch_size: 1\n", "YAML alias *a inside its own anchor"),
        "deep.json": ("[" * 100_000, "JSON nested deeper than 64 levels"),
        "deep.yaml": ("a: " + "[" * 100_000, "YAML nested deeper than 64 levels"),
        "chain.sh": ("#!/bin/bash\nX=$((" + "*".join(["2"] * 10_000) + "))" + RUN, "of over 1,024 characters"),
        "signs.sh": ("#!/bin/bash\nX=$((" + "- " * 100 + "1))" + RUN, "nested deeper than 64 operations"),
        "quotes.sh": ('A="$(' * 200 + "echo 1" + ')"' * 200 + RUN, "nested deeper than 32 levels"),
        "deep.py": ("x = " + "-" * 100_000 + "1\n", "Python nested deeper than 100 levels"),
        "sum.py": ("x = " + "+".join(["1"] * 100_000) + "\n", "Python nested deeper than 100 levels"),
        "big.py": ("#" * (1 << 20) + "\n", "a Python script over 1 MiB"),
        "big.sh": ("#!/bin/bash\n" + "#" * (1 << 20) + RUN, "a shell script of over 1 MiB"),
        "big.yaml": (" " * (4 << 20) + "\n", "over 4 MiB"),
        "long.yaml": ("a: " + "x" * (1 << 20) + "\n", "YAML of over 1 MiB"),
        "flat.yaml": ("a: [" + "1," * 30_000 + "]\n", "YAML of over 20,000 nodes"),
        "vars.sh": ("".join(f"V{i}=x\n" for i in range(300)) + RUN, "over 256 shell variables"),
        "commands.sh": ("run\n" * 6_000 + RUN, "over 5,000 shell commands"),
        "words.sh": ('A="' + "x " * 30_000 + '"\n' + "run $A\n" * 5 + RUN, "of over 100,000 words in all"),
        "self.sh": ("source self.sh\n" * 3 + "# padding\n" * 2_000 + RUN, "shell scripts over 2 MiB in all"),
        "names.sh": ("#!/bin/bash\ntorchrun train.py --deepspeed ds.json\n", "ds.json: JSON nested deeper than 64"),
        "sources.sh": ("#!/bin/bash\nsource lib.sh" + RUN, "arithmetic result over 2**63"),
    }


SPECIAL = {  # case: (the file, relative to the cases' folder where it is made there; what kind it is)
    "fifo": ("fifo.yaml", "a named pipe"),
    "zero": ("zero.yaml", "a character device"),
    "/dev/zero": ("/dev/zero", "a character device"),
    "/dev/urandom": ("/dev/urandom", "a character device"),
}


def _files(d: Path) -> dict[str, tuple[Path, str]]:
    """{case: (the --config file, what its refusal says)}, written under `d`."""
    (d / "ds.json").write_text("[" * 100_000)
    (d / "lib.sh").write_text("X=$(( 2**62 * 4 ))\n")
    out = {}
    for name, (text, says) in _texts().items():
        (d / name).write_text(text)
        out[name] = (d / name, says)
    os.mkfifo(d / "fifo.yaml")
    (d / "zero.yaml").symlink_to("/dev/zero")
    for name, (where, kind) in SPECIAL.items():
        out[name] = (d / where, f"not a regular file ({kind}")
    return out


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


CORE = """
import json, sys, time
from planner import checkconfig
out = {}
for name, path in json.loads(sys.argv[1]).items():
    start = time.perf_counter()
    try:
        checkconfig.check_config([path], {"gpu": "h100"})
        said = "read without a refusal"
    except Exception as e:
        said = f"{type(e).__name__}: {e}"
    out[name] = [said, time.perf_counter() - start]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    return _files(tmp_path_factory.mktemp("hostile"))


def _env(home: Path) -> dict[str, str]:
    """A child's environment: no Hugging Face cache of this machine nor Hub fetch, one thread."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    return {
        "OMP_NUM_THREADS": "1",
        "PATH": path,
        "HOME": str(home),
        "HF_HUB_CACHE": str(home / "hf"),
        "MEMPLAN_HUB": "0",
    }


def _run_bounded(args: list[str], cases, timeout_s: int) -> subprocess.CompletedProcess:
    """This python with `args`, under the memory bound, in the cases' folder's environment."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout_s,
        preexec_fn=_bounded,
        check=False,
        env=_env(cases["power.sh"][0].parent),
    )


@pytest.fixture(scope="module")
def core(cases) -> dict[str, list]:
    """Every case through checkconfig.check_config, in one bounded child: {case: [what it raised, seconds]}."""
    paths = json.dumps({name: str(path) for name, (path, _) in cases.items()})
    r = _run_bounded(["-c", CORE, paths], cases, timeout_s=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", [*_texts(), *SPECIAL])
def test_a_hostile_file_is_refused_quickly_in_one_line_through_the_core(cases, core, name):
    path, says = cases[name]
    said, seconds = core[name]
    assert said.startswith(("OverLimit: ", "BadInput: ")), said
    assert "\n" not in said and says in said and str(path) in said, said
    assert seconds < SECONDS, (name, seconds)


@pytest.mark.parametrize("name", ["power.sh", "doubling.sh", "bomb.yaml", "deep.json", "fifo", "/dev/zero"])
def test_a_hostile_file_is_refused_quickly_in_one_line_through_the_cli(cases, name):
    path, says = cases[name]
    start = time.perf_counter()
    r = _run_bounded(["-m", "planner.cli", "check", "--config", str(path), "--gpu", "h100"], cases, timeout_s=60)
    seconds = time.perf_counter() - start
    one_line_error(r, says)
    assert str(path) in r.stderr and seconds < SECONDS, (seconds, r.stderr)


# -- what stays readable -----------------------------------------------------------------------------------------
def test_yaml_anchors_and_aliases_within_the_limit_read():
    data = limits.load_yaml("base: &b {lr: 1.0e-5, bf16: true}\nsft: *b\nlist: [*b, *b]\n")
    assert data["sft"] == data["list"][1] == {"lr": 1e-5, "bf16": True}


def test_nesting_up_to_the_limit_reads():
    depth = limits.MAX_NESTING
    assert limits.load_json("[" * depth + "]" * depth) is not None
    assert limits.load_yaml("[" * (depth - 1) + "]" * (depth - 1)) is not None
    with pytest.raises(limits.OverLimit, match="nested deeper than 64"):
        limits.load_json("[" * (depth + 1) + "]" * (depth + 1))


def test_shell_arithmetic_holds_bash_s_64_bit_range(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("A=$(( 2**62 + (2**62 - 1) ))\nB=$(( -2**62 * 2 ))\nC=$(( 2**-1 ))\nrun $A $B $C\n")
    (cmd,) = read_script(path).commands
    assert cmd.argv[1:3] == [str(2**63 - 1), str(-(2**63))] and UNKNOWN in cmd.argv[3]
    path.write_text("A=$(( 2**63 ))\n")
    with pytest.raises(BadInput, match=r"arithmetic result over 2\*\*63"):
        read_script(path)


def test_a_source_loop_is_read_eight_levels_deep_then_noted(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("source run.sh\nrun\n")
    script = read_script(path)
    assert len(script.commands) == limits.MAX_SOURCE_DEPTH + 1
    assert any("sourced over 8 levels deep" in n for n in script.notes)


def test_a_regular_file_reads_with_text_mode_newlines(tmp_path):
    path = tmp_path / "ds.json"
    path.write_bytes(b'{"a":\r\n 1}\r')
    assert limits.read_config_text(path) == '{"a":\n 1}\n'
    with pytest.raises(IsADirectoryError):
        limits.read_config_text(tmp_path)


def test_a_yaml_document_read_again_is_parsed_once_and_each_reader_gets_its_own_copy():
    """check --config reads a run's files again at each release line they allow (the LLaMA-Factory YAML of the field
    corpus's lf-4453 at nine lines): the document is composed once, and what one reading changes the next never sees."""
    path = ROOT / "tests" / "field" / "lf-4453-qwen2-72b-lora-z3off-8k-8xa800" / "qwen2_72b_lora_sft.yaml"
    text = path.read_text()
    first = limits.load_yaml(text, path)
    composed = limits._composed.cache_info().misses
    first["cutoff_len"] = 1
    again = limits.load_yaml(text, path)
    assert again["cutoff_len"] == 8192 and again is not first
    assert limits._composed.cache_info().misses == composed
