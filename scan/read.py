"""Rows of a dataset file, streamed: JSONL (one object a line), JSON (an array of objects, or an object with a
list under "data"), CSV (a header row), Parquet (read a record batch at a time, with pyarrow: the `scan`
extra), and a folder written by `datasets`' `save_to_disk` (memory-mapped, read a batch at a time; of a
DatasetDict, its "train" split). Each row comes with its line number (the array index for JSON), and
every problem is a BadInput naming the file, the line and what is wrong."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from planner.errors import BadInput

MAX_LINE_BYTES = 64 * 2**20  # a longer line is refused, not read into memory whole
FORMATS = ("jsonl", "json", "csv", "parquet")
PARQUET_BATCH_ROWS = 4096


def file_format(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    fmt = {"jsonl": "jsonl", "ndjson": "jsonl", "json": "json", "csv": "csv", "parquet": "parquet"}.get(suffix)
    if fmt is None:
        raise BadInput(
            f"DATA {str(path)!r}: unknown format '.{suffix}'; accepted: .jsonl, .json, .csv, .parquet", "data"
        )
    return fmt


def rows(path: Path) -> Iterator[tuple[int, dict]]:
    if path.is_dir():
        yield from _saved_dataset(path)
        return
    if not path.is_file():
        raise BadInput(f"DATA {str(path)!r}: no such file", "data")
    fmt = file_format(path)
    if fmt == "jsonl":
        yield from jsonl_rows(path)
    elif fmt == "json":
        yield from _json(path)
    elif fmt == "parquet":
        yield from _parquet(path)
    else:
        yield from _csv(path)


def jsonl_rows(path: Path, flag: str = "DATA") -> Iterator[tuple[int, dict]]:
    """(line number, object) of every non-blank line of a JSONL file; `flag` names the file in errors."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise BadInput(f"{flag} {str(path)!r}: cannot be read ({e.strerror})", "data") from None
    with f:
        n = 0
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            n += 1
            if len(line) > MAX_LINE_BYTES:
                raise BadInput(f"{flag} {str(path)!r} line {n}: longer than {MAX_LINE_BYTES >> 20} MiB", "data")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise BadInput(f"{flag} {str(path)!r} line {n}: not JSON ({getattr(e, 'msg', e)})", "data") from None
            if not isinstance(row, dict):
                raise BadInput(f"{flag} {str(path)!r} line {n}: expected a JSON object", "data")
            yield n, row


def _json(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"DATA {str(path)!r}: not JSON ({e})", "data") from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise BadInput(f"DATA {str(path)!r}: expected a JSON array of objects", "data")
    for i, row in enumerate(data, 1):
        if not isinstance(row, dict):
            raise BadInput(f"DATA {str(path)!r} item {i}: expected a JSON object", "data")
        yield i, row


def _csv(path: Path) -> Iterator[tuple[int, dict]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for row in reader:
            yield reader.line_num, row


def _parquet(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BadInput(
            f"DATA {str(path)!r}: reading Parquet needs pyarrow (pip install 'memplan[scan]')", "data"
        ) from None
    try:
        f = pq.ParquetFile(path)
    except Exception as e:  # noqa: BLE001 (pyarrow raises its own ArrowInvalid / OSError kinds)
        raise BadInput(f"DATA {str(path)!r}: not a Parquet file ({str(e)[:160]})", "data") from None
    n = 0
    for batch in f.iter_batches(batch_size=PARQUET_BATCH_ROWS):
        for row in batch.to_pylist():
            n += 1
            yield n, row


def _saved_dataset(path: Path) -> Iterator[tuple[int, dict]]:
    if not ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
        raise BadInput(f"DATA {str(path)!r}: a folder, but not one written by datasets' save_to_disk", "data")
    try:
        import datasets
    except ImportError:
        raise BadInput(
            f"DATA {str(path)!r}: reading a saved dataset needs `datasets` (pip install datasets)", "data"
        ) from None
    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        if "train" not in ds:
            raise BadInput(
                f"DATA {str(path)!r}: a DatasetDict without a 'train' split (it has: {', '.join(ds)})", "data"
            )
        ds = ds["train"]
    n = 0
    for batch in ds.iter(batch_size=PARQUET_BATCH_ROWS):
        keys = list(batch)
        for values in zip(*(batch[k] for k in keys), strict=True):
            n += 1
            yield n, dict(zip(keys, values, strict=True))
