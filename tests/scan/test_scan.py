"""`planner scan`: token counts equal the tokenizer's and the chat template's, image tokens equal the real
Qwen2-VL image processor's on real PNG/JPEG files (built from its defaults, nothing downloaded), the
distribution is nearest-rank, and hostile data gets one line naming the file, line and problem. The
tokenizer is trained here with `tokenizers`."""

import json

import pytest

pytest.importorskip("transformers")
from PIL import Image

from planner.errors import BadInput
from planner.model.images import image_rule
from scan import read
from scan.scanner import distribution, scan, summary
from tests.planner.cli.helpers import one_line_error, planner

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "while",
    "dogs",
    "ran",
    "far",
    "away",
    "from",
    "home",
    "at",
    "night",
    "under",
    "bright",
    "stars",
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)] * 10, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} </s> {% endfor %}"
    folder = tmp_path_factory.mktemp("tok")
    fast.save_pretrained(folder)
    return str(folder), fast


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _text(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + (i * 13) % 40))


def test_text_tokens_are_the_tokenizers_and_the_distribution_is_nearest_rank(tmp_path, tokenizer):
    folder, fast = tokenizer
    texts = [_text(i) for i in range(300)]
    got = scan(_jsonl(tmp_path / "t.jsonl", [{"text": t} for t in texts]), folder)
    want = [len(fast(t)["input_ids"]) for t in texts]
    assert list(got.text) == want and want[0] == len(texts[0].split()) + 1  # the bos the tokenizer adds
    d = distribution(want)
    s = sorted(want)
    assert d["max"] == s[-1] and d["p50"] == s[149] and d["p90"] == s[269] and d["p99"] == s[296]
    assert summary(got)["longest_row"] == want.index(max(want)) + 1


def test_prompt_completion_and_chat_rows_are_counted_as_trained(tmp_path, tokenizer):
    folder, fast = tokenizer
    pc = scan(_jsonl(tmp_path / "pc.jsonl", [{"prompt": "the cat ", "completion": "sat on a mat"}]), folder)
    assert list(pc.text) == [len(fast("the cat sat on a mat")["input_ids"])]
    msgs = [[{"role": "user", "content": _text(i)}, {"role": "assistant", "content": _text(i + 1)}] for i in range(5)]
    chat = scan(_jsonl(tmp_path / "c.jsonl", [{"messages": m} for m in msgs]), folder)
    want = [len(fast.apply_chat_template(m, tokenize=True, return_dict=True)["input_ids"]) for m in msgs]
    assert list(chat.text) == want


@pytest.mark.parametrize("size", [(640, 480), (1920, 1080), (28, 28), (100, 2000), (4000, 3000)])
def test_image_tokens_equal_the_qwen2_vl_processors(tmp_path, tokenizer, size):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    w, h = size
    for ext in ("png", "jpg"):
        Image.new("RGB", (w, h), (120, 30, 200)).save(tmp_path / f"im.{ext}")
    row = {"text": "the cat", "images": ["im.png", "im.jpg", {"width": w, "height": h}]}
    got = scan(_jsonl(tmp_path / "v.jsonl", [row]), tokenizer[0])
    proc = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=12845056)  # the checkpoints' preprocessor_config
    grid = proc(Image.open(tmp_path / "im.png"), return_tensors="np")["image_grid_thw"][0]
    assert got.image[0] == 3 * int(grid.prod()) // 4 == 3 * image_rule("qwen2-vl")(w, h)
    assert got.images == 3


@pytest.mark.parametrize("size", [(448, 448), (640, 480), (1920, 1080), (100, 2000), (4000, 3000), (896, 448)])
@pytest.mark.parametrize("max_tiles", [12, 6])
def test_image_tokens_equal_internvls_processor(tmp_path, tokenizer, size, max_tiles):
    """InternVL as transformers runs it: GotOcr2ImageProcessor with crop_to_patches, 448-pixel tiles, and
    the processor's 256 tokens a tile plus <img> and </img> (processing_internvl.py)."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    w, h = size
    Image.new("RGB", (w, h), (10, 200, 30)).save(tmp_path / "im.png")
    proc = GotOcr2ImageProcessorPil(crop_to_patches=True, size={"height": 448, "width": 448}, max_patches=max_tiles)
    tiles = proc(Image.open(tmp_path / "im.png"), return_tensors="np")["pixel_values"].shape[0]
    got = scan(_jsonl(tmp_path / "v.jsonl", [{"text": "a", "image": "im.png"}]), tokenizer[0], f"internvl:{max_tiles}")
    assert got.image[0] == 256 * tiles + 2 and tiles == proc.get_number_of_image_patches(h, w)


def test_json_csv_and_parquet_files(tmp_path, tokenizer, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "d.json").write_text(json.dumps([{"text": "the cat"}, {"text": "a dog ran"}]))
    (tmp_path / "d.csv").write_text("text,other\nthe cat,1\na dog ran,2\n")
    msgs = [[{"role": "user", "content": "the cat"}], [{"role": "user", "content": "a dog ran"}]]
    pq.write_table(pa.table({"text": ["the cat", "a dog ran"] * 3000}), tmp_path / "d.parquet")
    pq.write_table(pa.table({"messages": msgs}), tmp_path / "m.parquet")
    monkeypatch.setattr(read, "PARQUET_BATCH_ROWS", 1000)  # several record batches
    assert (
        list(scan(str(tmp_path / "d.json"), tokenizer[0]).text)
        == list(scan(str(tmp_path / "d.csv"), tokenizer[0]).text)
        == [3, 4]
    )
    assert list(scan(str(tmp_path / "d.parquet"), tokenizer[0]).text) == [3, 4] * 3000
    chat = scan(str(tmp_path / "m.parquet"), tokenizer[0])
    assert list(chat.text) == [
        len(tokenizer[1].apply_chat_template(m, tokenize=True, return_dict=True)["input_ids"]) for m in msgs
    ]
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(BadInput, match="not a Parquet file"):
        scan(str(tmp_path / "bad.parquet"), tokenizer[0])


@pytest.mark.parametrize(
    "content,needle",
    [
        ('{"text": "the cat"}\n{"text": "the\n', "line 2: not JSON"),
        (
            '{"text": "the cat"}\n{"txt": "x"}\n',
            "line 2: no 'text', 'prompt'+'completion', 'messages' or 'input_ids' field",
        ),
        ('{"text": "the cat"}\n{"messages": [{"role": "user", "content": "x"}]}\n', "line 2: a 'messages' row"),
        ('{"text": "a", "images": ["missing.png"]}\n', "line 1: image"),
        ('{"text": "a", "images": [{"width": 0, "height": 5}]}\n', "line 1: image width and height"),
        ('{"text": "a", "images": [{"width": 5000, "height": 10}]}\n', "line 1: absolute aspect ratio"),
        ('{"text": 5}\n', "line 1: 'text' is not a string"),
        ("[1]\n", "line 1: expected a JSON object"),
        ("", "no rows"),
    ],
)
def test_hostile_rows_get_one_line_naming_file_and_line(tmp_path, tokenizer, content, needle):
    (tmp_path / "h.jsonl").write_text(content)
    with pytest.raises(BadInput) as e:
        scan(str(tmp_path / "h.jsonl"), tokenizer[0])
    assert str(tmp_path / "h.jsonl") in str(e.value) and needle in str(e.value)


def test_a_line_too_long_is_refused_without_reading_it_whole(tmp_path, tokenizer, monkeypatch):
    monkeypatch.setattr(read, "MAX_LINE_BYTES", 1000)
    (tmp_path / "long.jsonl").write_text('{"text": "the cat"}\n{"text": "' + "a " * 2000 + '"}\n')
    with pytest.raises(BadInput, match="line 2: longer than"):
        scan(str(tmp_path / "long.jsonl"), tokenizer[0])


def test_the_command_prints_a_table_or_json_and_refuses_in_one_line(tmp_path, tokenizer):
    data = _jsonl(tmp_path / "t.jsonl", [{"text": _text(i), "image": {"width": 448, "height": 448}} for i in range(50)])
    out = planner("scan", data, "--tokenizer", tokenizer[0], "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["rows"] == 50 and got["images"] == 50 and got["image_tokens"]["max"] == image_rule("qwen2-vl")(448, 448)
    assert got["tokens"]["max"] == got["text_tokens"]["max"] + 256
    table = planner("scan", data, "--tokenizer", tokenizer[0])
    assert table.returncode == 0 and "p99" in table.stdout and "50 rows (text), 50 images" in table.stdout
    one_line_error(planner("scan", data, "--tokenizer", str(tmp_path / "none")), "--tokenizer")
    one_line_error(planner("scan", str(tmp_path / "t.parquet"), "--tokenizer", tokenizer[0]), "no such file")
    one_line_error(
        planner("scan", data, "--tokenizer", tokenizer[0], "--image-rule", "llava-1.5"),
        "--image-rule 'llava-1.5': accepted: qwen2-vl, qwen3-vl, internvl",
    )


def test_a_dataset_saved_with_save_to_disk(tmp_path, tokenizer):
    datasets = pytest.importorskip("datasets")
    msgs = [[{"role": "user", "content": _text(i)}, {"role": "assistant", "content": _text(i + 3)}] for i in range(50)]
    datasets.Dataset.from_dict({"messages": msgs}).save_to_disk(str(tmp_path / "ds"))
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["the cat", "a dog ran"]})}).save_to_disk(
        str(tmp_path / "dd")
    )
    got = scan(str(tmp_path / "ds"), tokenizer[0])
    assert list(got.text) == [
        len(tokenizer[1].apply_chat_template(m, tokenize=True, return_dict=True)["input_ids"]) for m in msgs
    ]
    assert list(scan(str(tmp_path / "dd"), tokenizer[0]).text) == [3, 4]
    (tmp_path / "plain").mkdir()
    with pytest.raises(BadInput, match="not one written by datasets' save_to_disk"):
        scan(str(tmp_path / "plain"), tokenizer[0])


def test_plot_writes_the_histogram(tmp_path, tokenizer):
    pytest.importorskip("matplotlib")
    rows = [{"text": _text(i), "image": {"width": 64 * (1 + i % 7), "height": 448}} for i in range(200)]
    data, png = _jsonl(tmp_path / "t.jsonl", rows), tmp_path / "h.png"
    out = planner("scan", data, "--tokenizer", tokenizer[0], "--plot", str(png), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["plot"] == str(png)
    img = Image.open(png).convert("RGB")
    assert img.size == (1000, 500)
    colors = img.getcolors(maxcolors=1 << 20)
    red = sum(n for n, c in colors if c[0] > 150 and c[1] < 110 and c[2] < 110)
    blue = sum(n for n, c in colors if c[2] > 150 and c[0] < 120)
    assert red > 300 and blue > 3000  # the p99 / max lines, the bars


def test_a_one_gib_single_line_is_refused_in_one_line_and_bounded_memory(tmp_path, tokenizer):
    """Acceptance: a 1 GB single line (a sparse file: no disk is spent) gets one line naming the file and line,
    from `scan` and from `check --data`, and the process never holds the line (peak RSS far below 1 GiB)."""
    import subprocess
    import sys

    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"text": "')
        f.seek(2**30)
        f.write(b'"}\n')
    assert path.stat().st_size > 2**30
    # VmHWM is this process image's peak RSS (ru_maxrss would carry the forking pytest process's over exec)
    run = (
        "import sys; from planner.cli import main; rc = main(sys.argv[1:]); "
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM'))); sys.exit(rc)"
    )
    for args in (
        ["scan", str(path), "--tokenizer", tokenizer[0]],
        [
            "check",
            "--model",
            "qwen2.5-0.5b",
            "--gpu",
            "h100",
            "--micro-batch",
            "1",
            "--data",
            str(path),
            "--tokenizer",
            tokenizer[0],
        ],
    ):
        r = subprocess.run([sys.executable, "-c", run, *args], capture_output=True, text=True, timeout=300, check=False)
        one_line_error(r, f"{str(path)!r} line 1: longer than {read.MAX_LINE_BYTES >> 20} MiB")
        assert int(r.stdout.split()[-1]) * 1024 < 600 * 2**20, r.stdout  # VmHWM is in KiB


def test_pre_tokenized_rows_need_no_tokenizer(tmp_path):
    """{"input_ids": [...]} rows, as the bundled trainer reads them: their lengths, with no tokenizer."""
    data = _jsonl(tmp_path / "ids.jsonl", [{"input_ids": list(range(n))} for n in (3, 40, 7)])
    got = scan(data, None)
    assert list(got.text) == [3, 40, 7] and got.kind == "input_ids"
    with pytest.raises(BadInput, match="line 2: 'input_ids' is not a list of integers"):
        scan(_jsonl(tmp_path / "bad.jsonl", [{"input_ids": [1]}, {"input_ids": "12"}]), None)
