"""The bundled trainer with images: a tiny LLaVA from a JSONL of rows with real image files and a local processor
folder (tests/trainer/tiny_vlm_run.py). Plan equivalence as for text (tests/trainer/test_equivalence.py): every
split of one global batch gives the same losses over 10 fp32 steps, to 1e-5."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("PIL")
from tests.trainer.helpers import ROOT, launch, losses
from tests.trainer.tiny_vlm_run import folders, rows

STEPS = 10
REL_TOL = 1e-5
SEQ = 128


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm")
    model, proc = folders(root)
    return model, proc, rows(root / "data")


def planner(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "planner.cli", *args], check=False, cwd=cwd, capture_output=True, text=True
    )


def test_splits_of_one_global_batch_give_the_same_losses_with_images(tmp_path, tiny):
    model, proc, data = tiny
    common = {"model": model, "seq_len": SEQ, "data": data, "processor": proc, "max_steps": STEPS}
    runs = {
        "1 rank, micro 2, accum 4": (1, {"micro_batch": 2, "grad_accum": 4}),
        "2 ranks, micro 2, accum 2": (2, {"micro_batch": 2, "grad_accum": 2}),
        "2 ranks, micro 1, accum 4": (2, {"micro_batch": 1, "grad_accum": 4}),
        "1 rank, token budget 160": (1, {"micro_batch": 8, "grad_accum": 1, "max_tokens_per_micro_batch": 160}),
    }
    log = tmp_path / "cli.jsonl"
    out = planner(
        "train",
        "--model",
        model,
        "--micro-batch",
        "8",
        "--grad-accum",
        "1",
        "--seq-len",
        str(SEQ),
        "--precision",
        "fp32",
        "--data",
        data,
        "--processor",
        proc,
        "--max-steps",
        str(STEPS),
        "--log",
        str(log),
        "--device",
        "cpu",
        "--lr",
        "1e-3",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    ref = losses(log)
    assert len(ref) == STEPS and ref[-1] < ref[0]  # it trains
    for i, (name, (ranks, cfg)) in enumerate(runs.items()):
        _, run_log = launch(tmp_path, f"run{i}", ranks, **common, **cfg)
        got = losses(run_log)
        print(f"{name}: max relative difference {max(abs(a / b - 1) for a, b in zip(got, ref)):.2e}")
        assert got == pytest.approx(ref, rel=REL_TOL), name
    tokens = [json.loads(line)["tokens"] for line in log.read_text().splitlines()]
    assert tokens[0] < 8 * SEQ  # text tokens only: the image tokens carry no loss


def test_labels_skip_padding_and_image_tokens(tiny):
    from trainer import vlm

    _, proc, data = tiny
    processor = vlm.load_processor(proc)
    samples = vlm.load(data, SEQ, 256, processor)
    batch = vlm.collate(processor, samples[:3])  # no image, one image (marked), two images
    ids, labels = batch["input_ids"], batch["labels"]
    image = ids == processor.image_token_id
    assert image.sum(1).tolist() == [0, 16, 32]  # 16 tokens an image (4 x 4 patches of the 56-pixel tower)
    assert (labels[image] == -100).all() and (labels[batch["attention_mask"] == 0] == -100).all()
    assert ((labels != -100) == (~image & (batch["attention_mask"] == 1))).all()
    assert [len(s) for s in samples[:3]] == batch["attention_mask"].sum(1).tolist()


@pytest.mark.parametrize(
    "row, needle",
    [
        ({"text": "<image> w1 w2", "images": ["im0.png", "im1.png"]}, "1 image mark(s) in the text for 2 image(s)"),
        ({"text": "w1 w2", "images": ["missing.png"]}, "missing.png': no such file"),
        ({"text": "w1 w2", "images": [{"width": 5, "height": 5}]}, "an image is a path"),
        ({"prompt": "w1"}, "expected an object with 'text'"),
        ({"text": " ".join(["w1"] * 130)}, "130 tokens with its images, over --seq-len 128"),
    ],
)
def test_bad_rows_are_refused_in_one_line_naming_the_line(tmp_path, tiny, row, needle):
    from planner.errors import BadInput
    from trainer import vlm

    _, proc, data = tiny
    bad = _bad_file(tmp_path, data, row)
    with pytest.raises(BadInput) as e:
        vlm.load(str(bad), SEQ, 256, vlm.load_processor(proc))
    assert "line 2" in str(e.value) and needle in str(e.value) and "\n" not in str(e.value)


def _bad_file(tmp_path, data, row):
    for k in range(2):
        (tmp_path / f"im{k}.png").write_bytes((ROOT / data).parent.joinpath(f"im{k}.png").read_bytes())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "w3 w4"}) + "\n" + json.dumps(row) + "\n")
    return bad


def test_the_command_refuses_a_bad_row_before_anything_is_written(tmp_path, tiny):
    model, proc, data = tiny
    bad = _bad_file(tmp_path, data, {"text": "w1", "images": ["missing.png"]})
    out = planner(
        "train",
        "--model",
        model,
        "--micro-batch",
        "1",
        "--seq-len",
        str(SEQ),
        "--precision",
        "fp32",
        "--data",
        str(bad),
        "--processor",
        proc,
        "--save-dir",
        str(tmp_path / "run"),
        "--device",
        "cpu",
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "line 2" in out.stderr, out.stderr
    assert not (tmp_path / "run").exists()  # nothing written


def test_a_processor_needs_a_file_of_rows_and_a_processor_folder(tmp_path, tiny):
    model, proc, data = tiny
    base = ["train", "--model", model, "--micro-batch", "1", "--seq-len", "64", "--device", "cpu"]
    out = planner(*base, "--processor", proc)
    assert out.returncode == 2 and "--processor needs --data FILE" in out.stderr
    out = planner(*base, "--data", data, "--processor", str(tmp_path / "nope"))
    assert out.returncode == 2 and "no such folder" in out.stderr
    out = planner(*base, "--data", data, "--processor", model)  # a model folder: no processor in it
    assert out.returncode == 2 and "--processor" in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_grpo_of_a_vlm_runs_through_trl_with_each_prompts_images(tmp_path, tiny):
    """TRL's GRPOTrainer with the processor: each step's tokens (TRL's num_tokens: the prompts and completions of its
    4 generations) hold 16 image tokens an image, so the images reached the model's inputs."""
    pytest.importorskip("trl")
    from tests.trainer.tiny_vlm_run import words

    model, proc, data = tiny
    prompts = [(words(3 + i % 4, i), [f"im{k % 3}.png" for k in range(i % 3)]) for i in range(4)]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": p, "images": ims}) + "\n" for p, ims in prompts))
    for k in range(3):
        (tmp_path / f"im{k}.png").write_bytes((ROOT / data).parent.joinpath(f"im{k}.png").read_bytes())
    out = planner(
        "train",
        "--workload",
        "grpo",
        "--model",
        model,
        "--num-generations",
        "4",
        "--max-prompt-length",
        "64",
        "--max-completion-length",
        "8",
        "--precision",
        "fp32",
        "--micro-batch",
        "4",
        "--max-steps",
        "3",
        "--device",
        "cpu",
        "--data",
        str(path),
        "--processor",
        proc,
        "--json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    metrics = json.loads(out.stdout[out.stdout.index("{") :])["metrics"]
    assert len(metrics) == 3 and all(m["completions/mean_length"] == 8 for m in metrics)  # never cut short
    # the chat template: "user", 16 tokens an image, the words, "</s>", "assistant"
    want = [4 * (1 + 16 * len(ims) + len(p.split()) + 2 + 8) for p, ims in prompts[:3]]
    got = [m["num_tokens"] for m in metrics]
    assert [b - a for a, b in zip([0, *got], got)] == want


def test_grpo_with_a_processor_needs_a_vlm_and_prompt_rows(tmp_path, tiny):
    model, proc, data = tiny
    base = ["train", "--workload", "grpo", "--num-generations", "2", "--micro-batch", "2", "--device", "cpu"]
    out = planner(*base, "--model", "debug-llama", "--data", data, "--processor", proc)
    assert out.returncode == 2 and "for --workload grpo of a VLM" in out.stderr, out.stderr
    out = planner(*base, "--model", model, "--data", data, "--processor", proc)  # SFT rows: 'text', no 'prompt'
    assert out.returncode == 2 and "line 1: expected an object with 'prompt'" in out.stderr, out.stderr
