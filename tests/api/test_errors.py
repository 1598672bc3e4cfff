"""api/errors.py: the API's errors name its JSON fields, not the CLI's flags (issue 30, item 7)."""

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from api.errors import api_message
from api.main import create_app
from api.settings import Settings

PLAN = {"model": "llama-3.1-8b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 256, "seq_len": 4096}


@pytest.fixture
def client(tmp_path):
    client = TestClient(create_app(Settings(store=tmp_path / "store.sqlite")))
    yield client
    client.app.state.pool.stop()  # the planning workers a plan started (no lifespan stops them)


def msg(client, body: dict, path: str = "/v1/plans") -> tuple[list, str]:
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    return d["loc"], d["msg"]


@pytest.mark.parametrize(
    "cli, api",
    [
        (
            "give --seq-len N, or --data FILE --tokenizer DIR to plan for the data's longest row",
            "give seq_len, or data and tokenizer to plan for the data's longest row",
        ),
        (
            "--offload optimizer needs DeepSpeed: use --zero 1, 2 or 3 (or --fsdp full with --offload optimizer+params)",
            "offload optimizer needs DeepSpeed: use zero 1, 2 or 3 (or fsdp full with offload optimizer+params)",
        ),
        ("--quant nf4 needs LoRA adapters: give --lora-rank > 0", "quant nf4 needs LoRA adapters: give lora_rank > 0"),
        # the workload's fields by their path; --max-length is DPO's where the message is about the workload
        (
            "--global-batch 16 is not divisible by --num-generations 3",
            "global_batch 16 is not divisible by workload.num_generations 3",
        ),
        (
            "--max-length is a DPO input: it needs --workload dpo",
            "workload.max_length is a DPO input: it needs workload.kind dpo",
        ),
        (
            "give --seq-len or --data, not both (--max-length caps what --data asks for)",
            "give seq_len or data, not both (max_length caps what data asks for)",
        ),
        # a command line in backquotes stays the CLI's; a flag the API does not take stays as it is
        (
            "plans are analytic: probe a phase with `planner probe --workload grpo`",
            "plans are analytic: probe a phase with `planner probe --workload grpo`",
        ),
        (
            "--emit 'x': a file of that name exists; --emit takes a folder",
            "--emit 'x': a file of that name exists; --emit takes a folder",
        ),
    ],
)
def test_flags_become_the_fields_the_api_takes(cli, api):
    assert api_message(cli) == api


def test_a_422_speaks_the_api_not_the_cli(client):
    """Before: "give --seq-len N, or --data FILE --tokenizer DIR ..." from POST /v1/plans."""
    loc, text = msg(client, {**PLAN, "seq_len": None})
    assert loc == ["body", "seq_len"] and text.startswith("give seq_len, or data and tokenizer")
    loc, text = msg(client, {**PLAN, "image_tokens": 9000})
    assert loc == ["body", "image_tokens"] and text.startswith("image_tokens 9000:")
    # refused inside the workload model's validator: the core's message, without pydantic's "Value error, "
    loc, text = msg(client, {**PLAN, "workload": {"num_generations": 4}})
    assert (
        loc == ["body", "workload"] and text == "workload.num_generations is a GRPO input: it needs workload.kind grpo"
    )
    loc, text = msg(
        client, {"model": "debug-llama", "micro_batch": 1, "seq_len": 32, "backend": "cpu", "zero": 2}, "/v1/probes"
    )
    assert loc == ["body", "zero"] and "--" not in text
