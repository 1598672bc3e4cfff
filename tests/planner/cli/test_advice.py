"""A "does not fit" on the command line: advice from the term that decides the peak, the nearest settings that fit,
exit 2 for requests that cannot exist, and output a pipe can read (issue 30, items 1 to 3)."""

import json
import re

import pytest

from tests.planner.cli.helpers import one_line_error, planner

SMALL_8B = ["--model", "llama-3.1-8b", "--gpu", "h100", "--precision", "bf16-pure", "--evidence", "analytic"]
QWEN_72B = ["suggest", "--model", "qwen2.5-72b", "--gpu", "a100-80gb", "--gpus-per-node", "8"]
GRPO_16 = ["--workload", "grpo", "--max-prompt-length", "16", "--max-completion-length", "16", "--num-generations", "8"]


@pytest.mark.parametrize(
    "shape", [["--seq-len", "256", "--checkpointing", "full"], GRPO_16], ids=["sft-256", "grpo-16+16"]
)
def test_advice_comes_from_the_optimizer_steps_temporaries_and_the_fused_optimizer_fits(shape):
    """Saved activations are 0.1 GiB: the peak is the foreach AdamW step's copies, not the sequence."""
    micro = ["--micro-batch", "8" if shape is GRPO_16 else "1"]
    r = planner("check", *SMALL_8B, *micro, *shape, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 3, r.stderr
    reason = out["plan"]["reason"]
    assert "optimizer step's temporaries 15.0 GiB" in reason and "--optimizer adamw-fused" in reason, reason
    assert "shorter sequence" not in reason and "add GPUs" not in reason, reason
    fused = next(n for n in out["nearest"] if n["change"] == "optimizer adamw-fused")
    assert fused["plan"]["fits"] and fused["plan"]["optimizer"] == "adamw-fused"
    assert (fused["plan"]["precision"], fused["plan"]["zero_stage"]) == ("bf16-pure", 0)  # the user's own knobs
    assert planner("check", *SMALL_8B, *micro, *shape, "--optimizer", "adamw-fused").returncode == 0


def test_activation_and_logit_peaks_get_their_own_advice():
    act = json.loads(
        planner(
            "check",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--gpus-per-node",
            "8",
            "--micro-batch",
            "8",
            "--seq-len",
            "8192",
            "--zero",
            "3",
            "--json",
        ).stdout
    )
    assert "saved activations" in act["plan"]["reason"] and "--checkpointing full" in act["plan"]["reason"]
    logits = json.loads(
        planner(
            "check",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--gpus-per-node",
            "8",
            "--micro-batch",
            "4",
            "--seq-len",
            "8192",
            "--zero",
            "3",
            "--checkpointing",
            "full",
            "--json",
        ).stdout
    )
    assert "logits/loss" in logits["plan"]["reason"] and "--loss chunked" in logits["plan"]["reason"]


def test_nothing_fits_ends_with_the_nearest_settings_that_fit():
    """LoRA r16 fits the 72B story (54.51 GiB under ZeRO-3 with the chunked loss and offload-inputs checkpointing, no
    optimizer offload, as docs/planning.md prints it; 63.08 with full checkpointing before suggest searched
    offload-inputs; the bundled trainer runs no chunked loss under FSDP, whose 71.42 GiB plan had ranked first); the
    old output never said so."""
    args = [
        "suggest",
        "--model",
        "qwen2.5-72b",
        "--gpu",
        "a100-80gb",
        "--gpus-per-node",
        "8",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--offload",
        "none",
        "--evidence",
        "analytic",
    ]
    out = json.loads(planner(*args, "--json").stdout)
    lora = next(n for n in out["nearest"] if n["change"] == "LoRA rank 16")
    assert lora["changes"] == {"lora_rank": 16} and lora["plan"]["fits"]
    assert lora["plan"]["offload"] == "none" and round(lora["plan"]["memory"]["device_total_bytes"] / 2**30, 2) == 54.51
    text = planner(*args)
    assert text.returncode == 3
    assert "nearest settings that fit" in text.stdout and "LoRA rank 16" in text.stdout
    assert len(text.stdout.splitlines()) < 80, len(text.stdout.splitlines())


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["suggest", "--global-batch", "8", "--zero", "0", "--fsdp", "off", "--offload", "optimizer"],
            "needs DeepSpeed",
        ),
        (["suggest", "--global-batch", "8", "--fsdp", "hybrid"], "--fsdp hybrid"),
        (["suggest", "--global-batch", "8", "--gpu", "v100-32gb", "--precision", "bf16"], "has no bf16 support"),
        (["check", "--micro-batch", "1", "--gpu", "v100-32gb", "--precision", "bf16"], "has no bf16 support"),
    ],
)
def test_requests_that_cannot_exist_exit_2_with_the_reason(args, needle):
    gpu = [] if "--gpu" in args else ["--gpu", "h100"]
    r = planner(*args, "--model", "llama-3.2-1b", *gpu, "--seq-len", "256", "--evidence", "analytic")
    one_line_error(r, needle)


def test_fitting_suggest_prints_no_rejected_table_and_check_prints_its_speed():
    r = planner(
        "suggest",
        "--model",
        "llama-3.2-1b",
        "--gpu",
        "h100",
        "--global-batch",
        "16",
        "--seq-len",
        "2048",
        "--evidence",
        "analytic",
    )
    assert r.returncode == 0 and "rejected" not in r.stdout
    c = planner(
        "check",
        "--model",
        "llama-3.2-1b",
        "--gpu",
        "h100",
        "--micro-batch",
        "2",
        "--seq-len",
        "2048",
        "--evidence",
        "analytic",
    )
    assert c.returncode == 0 and c.stdout.splitlines()[1].startswith("speed: ") and "tokens/s" in c.stdout


def test_headlines_stay_on_one_line_and_each_reason_once():
    r = planner("check", *SMALL_8B, "--micro-batch", "1", "--seq-len", "256", "--checkpointing", "full")
    first = r.stdout.splitlines()[0]
    assert first.startswith("llama-3.1-8b: micro 1") and first.rstrip().endswith("offload"), first
    s = planner(
        "suggest",
        "--model",
        "qwen2.5-72b",
        "--gpu",
        "a100-80gb",
        "--gpus-per-node",
        "8",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--offload",
        "none",
        "--evidence",
        "analytic",
        "--json",
    )
    reasons = [p["reason"] for p in json.loads(s.stdout)["rejected"]]
    text = planner(
        "suggest",
        "--model",
        "qwen2.5-72b",
        "--gpu",
        "a100-80gb",
        "--gpus-per-node",
        "8",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--offload",
        "none",
        "--evidence",
        "analytic",
    ).stdout
    table = text[text.index("rejected") : text.index("nearest settings")]
    rows = [line for line in table.splitlines() if line.startswith("│ ") and line.split("│")[1].strip()]
    shapes = {re.sub(r"\d[\d,.]*", "#", r) for r in reasons}  # reasons that differ only in figures are one row
    assert len(rows) == len(shapes) < len(reasons), (len(rows), len(shapes), len(reasons))


def test_rejected_reasons_that_differ_only_in_their_figures_are_one_row():
    """Issue 30 item 3: the 72B suggest gave 7 of its 12 rejected rows the same host-RAM reason, each with
    its own GiB figure."""
    from planner.cli.render_search import rejected_table

    r = planner(*QWEN_72B, "--global-batch", "256", "--seq-len", "4096", "--evidence", "analytic", "--json")
    assert r.returncode == 3, r.stderr
    from planner.config.spec import Plan

    rejected = [Plan.model_validate(p) for p in json.loads(r.stdout)["rejected"]]
    host = [p for p in rejected if p.reason and p.reason.startswith("offload needs")]
    assert len({p.reason for p in host}) > 1  # the same reason with different figures
    table = rejected_table(rejected)
    reasons = [row[-1] for row in table.rows]
    shapes = [re.sub(r"\d[\d,.]*", "#", c) for c in reasons]
    assert len(shapes) == len(set(shapes)) and len(reasons) < len({p.reason for p in rejected})
    assert sum(int(row[0]) for row in table.rows) == len(rejected)


def test_a_term_whose_removal_is_not_enough_says_so_and_leads_with_sharding():
    """Issue 30 item 1: GRPO on 8 GPUs in bf16-pure peaks at the optimizer step, but without its 15 GiB of
    foreach copies it still needs 87 GiB: the fused optimizer cannot be the first remedy. The sharding offered is
    the one bf16-pure runs with (FSDP: DeepSpeed keeps fp32 master weights, so --zero 1 is refused), and it fits."""
    args = [*SMALL_8B, "--gpus-per-node", "8", "--micro-batch", "8", *GRPO_16, "--json"]
    out = json.loads(planner("check", *args).stdout)
    reason = out["plan"]["reason"]
    fixes = reason.split("(without it still ")[1].split("): ", 1)[1]
    assert fixes.startswith("shard the step (--fsdp full) or "), reason
    assert "--optimizer adamw-fused" in fixes  # still named: it lowers the peak
    sharded = planner("check", *args, "--fsdp", "full")
    assert json.loads(sharded.stdout)["plan"]["fits"], sharded.stdout[:300]


def test_a_run_that_fits_for_training_and_not_at_its_first_evaluation_says_so_in_its_frameworks_keys():
    """Issue 32 item 3: the evaluation phase decides; check names it, prints every phase's peak, and the nearest
    setting that fits is the evaluation batch, in LLaMA-Factory's key."""
    args = ["--model", "llama-3.1-8b", "--gpu", "h100", "--gpus-per-node", "8", "--micro-batch", "1"]
    args += ["--seq-len", "4096", "--zero", "3", "--checkpointing", "full", "--evidence", "analytic"]
    r = planner("check", *args, "--eval-batch", "16", "--framework", "llamafactory")
    assert r.returncode == 3, r.stderr
    assert "runs out of memory at the first evaluation, not in training: 16 evaluation rows" in r.stdout
    assert "peak during evaluation" in r.stdout and "phase optimizer-step" in r.stdout
    assert "evaluation batch 1, in llamafactory's keys: per_device_eval_batch_size: 1" in r.stdout
    out = json.loads(planner("check", *args, "--eval-batch", "16", "--json").stdout)
    assert set(out["plan"]["memory"]["phases"]) == {
        "backward",
        "end-of-backward",
        "optimizer-step",
        "evaluation",
        "load",
        "checkpoint-save",
    }
    assert planner("check", *args, "--eval-batch", "1").returncode == 0


def test_only_the_peak_phase_is_marked():
    shape = ["--micro-batch", "1", "--seq-len", "4096", "--gpus-per-node", "8", "--zero", "3", "--precision", "bf16"]
    r = planner("check", "--model", "llama-3.1-8b", "--gpu", "h100", "--evidence", "analytic", *shape)
    marked = [line for line in r.stdout.splitlines() if "(peak)" in line]
    assert len(marked) == 1 and "phase backward (peak)" in marked[0], marked


def test_a_host_ram_row_is_shown_only_where_the_host_ram_is_what_makes_it_fit():
    """The LLaMA-Factory example's "2048 GiB host RAM per node" row fitted by its micro-batch alone (ZeRO-2 without
    offload needs no host RAM): left out. The 72B suggest's row offloads the optimizer into that RAM: kept."""
    args = ["--config", "docs/examples/configs/llamafactory/qwen2_5vl_lora_sft.yaml", "--gpu", "a100-80gb"]
    out = json.loads(planner("check", *args, "--gpus-per-node", "8", "--json").stdout)
    assert out["nearest"] and not [n for n in out["nearest"] if "host_ram_gb" in n["changes"]]
    big = json.loads(planner(*QWEN_72B, "--global-batch", "256", "--seq-len", "4096", "--json").stdout)
    host = [n for n in big["nearest"] if "host_ram_gb" in n["changes"]]
    assert host and host[0]["plan"]["memory"]["host_bytes_per_node"] > 512 * 2**30
