"""Issue 50 item 1, in headless Chromium against a real server: a plan's files (every framework's, the best plan's and
any ranked plan's) viewed, copied and downloaded as a zip with the command, then read back by `planner check
--config`; the workload, image and video lines and the phase that decides; labels from the declaration's
descriptions; your own configuration pasted and checked (POST /v1/check/config)."""

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.api.test_web import ARTIFACTS, _ready, browser, page, pytestmark, server  # noqa: F401 - the server, the browser; skipped without Chromium

ROOT = Path(__file__).resolve().parents[2]


def _plan(pg, model: str, gpus: int, batch: int, **selects: str) -> dict:
    """Plan from the form; the answer's best plan (as the page holds it) once its files are listed."""
    pg.select_option("#model", model)
    pg.fill("#gpus_per_node", str(gpus))
    pg.fill("#global_batch", str(batch))
    for field, value in selects.items():
        pg.select_option(f"[id='{field}']", value)
    pg.click("#submit")
    pg.wait_for_selector("#answer[data-ready] #files-list details")
    return pg.evaluate("last.answer.plans[0]")


def _download(pg, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """Click the zip button; (the zip's name, {file name: text})."""
    with pg.expect_download() as got:
        pg.click("#zip")
    data = Path(got.value.path()).read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        files = {n: z.read(n).decode() for n in z.namelist()}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return got.value.suggested_filename, files


def _check_config(path: Path, *flags: str) -> dict:
    """`planner check --config FILE --gpu h100 --json`, as a user runs it on the files downloaded."""
    cmd = [sys.executable, "-m", "planner.cli", "check", "--config", str(path), "--gpu", "h100", *flags, "--json"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode in (0, 3), r.stderr[-2000:]
    return json.loads(r.stdout)


def _same_plan(back: dict, plan: dict) -> None:
    b = back["plan"]
    assert (b["framework"], b["micro_batch"], b["grad_accum"], b["world_size"]) == (
        plan["framework"],
        plan["micro_batch"],
        plan["grad_accum"],
        plan["world_size"],
    )
    for knob in ("precision", "checkpointing", "zero_stage", "fsdp", "offload", "lora_rank", "workload"):
        assert b[knob] == plan[knob], knob


def test_an_ms_swift_plans_files_download_and_read_back(server, page, tmp_path):  # noqa: F811
    _ready(page, server)
    plan = _plan(page, "qwen2.5-0.5b", 8, 64, framework="swift")
    assert page.inner_text("#command") == "bash swift_train.sh" == plan["launch"]["command"]
    page.click("#files-list details[data-file='swift_train.sh'] summary")
    assert "swift sft" in page.inner_text("#files-list details[data-file='swift_train.sh'] pre")
    name, files = _download(page, tmp_path)
    assert name == "memplan-plan-1-swift.zip" and "swift_train.sh" in files
    assert "command.sh" not in files  # the command runs the script itself
    _same_plan(_check_config(tmp_path / "swift_train.sh"), plan)
    # any ranked plan: its own files (an FSDP plan of ms-swift names its swift_fsdp.json)
    ranks = page.evaluate("last.answer.plans.map(p => p.fsdp)")
    rank = next(i + 1 for i, fsdp in enumerate(ranks) if fsdp != "off")
    page.click(f"#plans [data-rank='{rank}']")
    page.wait_for_selector("#files-list details[data-file='swift_fsdp.json']")
    assert page.inner_text("#files-title") == f"Plan #{rank}: files and command"
    name, files = _download(page, tmp_path)
    assert name == f"memplan-plan-{rank}-swift.zip" and {"swift_train.sh", "swift_fsdp.json"} <= set(files)
    _same_plan(_check_config(tmp_path / "swift_train.sh"), page.evaluate(f"last.answer.plans[{rank - 1}]"))
    page.screenshot(path=str(ARTIFACTS / "web-files.png"), full_page=True)


def test_a_grpo_plans_files_download_and_read_back_with_its_workload_and_phases(server, page, tmp_path):  # noqa: F811
    _ready(page, server)
    page.select_option("[id='workload.kind']", "grpo")
    page.fill("[id='workload.num_generations']", "4")
    plan = _plan(page, "qwen2.5-0.5b", 2, 16, framework="trl")
    assert "workload: GRPO: 4 generations of <= 512 tokens" in page.inner_text("#lines")
    assert "peak during backward" in page.inner_text("#phase-title")
    assert page.inner_text("#phases tr.peak").startswith("training: backward (peak: decides)")
    _, files = _download(page, tmp_path)
    assert files["command.sh"] == f"#!/bin/bash\n{plan['launch']['command']}\n"
    assert set(files) >= {"train_args.json", "launch.sbatch", "requirements.txt"}
    # requirements.txt pins the TRL release memplan wrote them for (1.16.0, planner.export.launch.pinned): without it
    # the reading would take TRL's hungriest line (before 1.10 GRPO's batch counted prompts and scored whole logits)
    assert "trl==1.16.0" in files["requirements.txt"]
    back = _check_config(tmp_path / "command.sh")
    _same_plan(back, plan)
    assert back["plan"]["workload"]["num_generations"] == 4 and back["config"]["framework"] == "trl"


def test_ppo_roles_images_and_videos_lines(server, page):  # noqa: F811
    _ready(page, server)
    page.select_option("[id='workload.kind']", "ppo")
    page.fill("[id='workload.roles.placement']", "actor:4,critic:2,rollout:2")
    # OpenRLHF places roles in groups of their own (verl runs one pool and refuses this placement: its rule prunes)
    _plan(page, "qwen2.5-0.5b", 8, 64, framework="openrlhf")
    assert (
        "workload: PPO: 8 samples of <= 512 tokens after prompts of <= 512, vllm rollout, actor:4,critic:2,rollout:2"
        in (page.inner_text("#lines"))
    )
    # the best plan (accumulation 1 since the search tries it past a micro-batch that does not fit) peaks in the
    # actor's update on the actor's own 4 GPUs
    assert page.inner_text("#phases tr.peak").startswith("actor (4 GPUs): actor-update (peak: decides)")
    assert "rollout (2 GPUs): rollout" in page.inner_text("#phases")
    page.select_option("[id='workload.kind']", "sft")
    page.select_option("#framework", "memplan")
    page.fill("#seq_len", "16384")
    page.fill("#images", "2")
    page.fill("#videos", "1")
    page.fill("#video_seconds", "10")
    page.fill("#max_pixels", "1003520")  # the checkpoint's own cap (16,384 tokens an image) passes seq_len
    _plan(page, "qwen2.5-vl-3b", 6, 24, gpu="h20")
    lines = page.inner_text("#lines")
    assert "images: 2 a sample at the qwen2-vl rule's worst case, max_pixels 1,003,520, 1,280 tokens an image" in lines
    assert "videos: 1 a sample, 7,680 tokens each at worst (10 s at 2 fps" in lines


def test_labels_come_from_the_declarations_descriptions(server, page):  # noqa: F811
    """Issue 50: labels were raw field names ("Quant Absmax", "Lora Base Fp32", "Cp Attention")."""
    from api.webform import label_and_help
    from planner.config.knobfields import choices, info

    _ready(page, server)
    for field in ("quant_absmax", "lora_base_fp32", "cp_attention", "frozen"):
        label = page.inner_text(f"label[for='{field}']")
        assert label == label_and_help(info(field).description, choices(field) or ())[0], field
        assert info(field).description.startswith(label) and label != field.replace("_", " ").title(), label
    texts = page.eval_on_selector_all("#plan-form label[for], #plan-form .legend", "ls => ls.map(l => l.textContent)")
    names = {n for n in page.eval_on_selector_all("#plan-form [name]", "es => es.map(e => e.name)")}
    titled = {n.split(".")[-1].replace("_", " ").title() for n in names}
    assert not [t for t in texts if t in names or t in titled or not t.strip()]


def test_your_own_configuration_pasted_is_checked(server, page, tmp_path):  # noqa: F811
    _ready(page, server)
    _plan(page, "qwen2.5-0.5b", 8, 64, framework="swift")
    _, files = _download(page, tmp_path)
    page.fill("#cfg-text", files["swift_train.sh"])
    page.fill("#cfg-name", "swift_train.sh")
    page.click("#cfg-check")
    page.wait_for_selector("#cfg-answer:not([hidden])")
    assert page.inner_text("#cfg-title").startswith("swift: qwen2.5-0.5b on 8 x h100-80gb")
    assert "micro_batch" in page.inner_text("#cfg-settings")
    page.fill("#cfg-text", "not a configuration at all")
    page.fill("#cfg-name", "notes.txt")
    page.click("#cfg-check")
    page.wait_for_selector("#err-cfg:not(:empty)")
    assert page.locator("#cfg-answer").is_hidden()


@pytest.fixture(autouse=True)
def _artifacts():
    ARTIFACTS.mkdir(exist_ok=True)
