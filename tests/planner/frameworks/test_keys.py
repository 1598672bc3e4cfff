"""The frameworks' key tables (planner/frameworks/keys.py, <name>/keys.py): cited defaults, value maps the readers
read back, and per-release key names that the Release lines and the readers take from the one row."""

import re

import pytest

from planner.frameworks import FRAMEWORKS
from planner.frameworks.axolotl.keys import KEYS as AXOLOTL
from planner.frameworks.hf.keys import KEYS as HF
from planner.frameworks.keys import Key, Table
from planner.frameworks.llamafactory.keys import KEYS as LLAMAFACTORY
from planner.frameworks.openrlhf import reader as openrlhf_reader
from planner.frameworks.openrlhf.keys import KEYS as OPENRLHF
from planner.frameworks.swift import reader_2 as swift2
from planner.frameworks.swift.keys import KEYS as SWIFT
from planner.frameworks.verl.keys import KEYS as VERL
from planner.intake import vocab
from planner.intake.collect import accepted

TABLES = {
    "hf": HF,
    "swift": SWIFT,
    "llamafactory": LLAMAFACTORY,
    "axolotl": AXOLOTL,
    "openrlhf": OPENRLHF,
    "verl": VERL,
}
CITE = re.compile(r"[\w/]+\.(py|yaml):\d+")


@pytest.mark.parametrize("name", TABLES)
def test_every_default_a_table_gives_is_cited_at_a_file_and_line(name):
    uncited = [r.field for r in TABLES[name].rows.values() if r.default is not None and not CITE.search(r.cite)]
    assert not uncited, uncited


def test_every_hf_key_is_one_transformers_or_trl_takes():
    """The HF/TRL table's keys against the names transformers' TrainingArguments and TRL's configs take
    (presets/keys_hf.txt, generated from the installed packages): a misspelled row fails here."""
    assert sorted(r.key for r in HF.rows.values() if r.key not in accepted("hf")) == []


def test_the_hf_writer_and_reader_agree_on_the_optimizer_and_attention_words():
    assert {o: vocab.optimizer(HF["optimizer"].write(o)) for o in HF["optimizer"].to_value} == {
        o: o for o in HF["optimizer"].to_value
    }
    assert {a: vocab.attention(HF["attention"].write(a)) for a in ("flash", "eager")} == {
        "flash": "flash",
        "eager": "eager",
    }


@pytest.mark.parametrize("name", ["swift", "llamafactory", "axolotl", "openrlhf"])
def test_the_attention_a_writer_writes_reads_back_as_the_same_attention(name):
    row = TABLES[name]["attention"]
    assert {a: vocab.attention(row.write(a)) for a in ("flash", "sdpa", "eager")} == {
        "flash": "flash",
        "sdpa": "sdpa",
        "eager": "eager",
    }


def test_ms_swifts_tuner_flag_is_one_row_renamed_by_release():
    """v2.5.2 --sft_type, v3.x --train_type, v4.x --tuner_type (planner.frameworks.swift.keys cites each)."""
    swift = FRAMEWORKS["swift"]
    shown = {r.name: swift.at(r.name).keys["lora"] for r in swift.releases}
    assert shown == {
        "2": "--sft_type",
        "3": "--train_type",
        "3.4": "--train_type",
        "3.7": "--train_type",
        "3.9": "--train_type",
        "4": "--tuner_type",
    }
    assert swift2.RENAMED["sft_type"] == "tuner_type" and swift2.RENAMED["batch_size"] == "per_device_train_batch_size"


def test_openrlhfs_flat_names_read_as_their_dotted_flags():
    old = openrlhf_reader.OLD
    assert old["micro_train_batch_size"] == "train.micro_batch_size"
    assert old["bf16"] == old["param_dtype"] == "ds.param_dtype"  # 0.9.0's name, then 0.9.10 / 0.10's
    assert old["generate_max_len"] == old["max_new_tokens"] == "rollout.max_new_tokens"
    assert old["critic_num_gpus_per_node"] == "critic.num_gpus_per_node"
    assert FRAMEWORKS["openrlhf"].at("0.9").keys["precision"] == "--bf16"
    assert FRAMEWORKS["openrlhf"].at("0.10").keys["micro_batch"] == "--micro_train_batch_size"


def test_a_value_map_leaves_what_it_does_not_name_and_lists():
    row = Key("attention", "attn_impl", to_value={"flash": "flash_attn"})
    assert (row.write("flash"), row.write("sdpa"), row.write(["flash"])) == ("flash_attn", "sdpa", ["flash"])


def test_a_table_takes_one_row_a_field_and_shows_keys_in_the_order_given():
    with pytest.raises(AssertionError):
        Table(Key("seq_len", "max_length"), Key("seq_len", "cutoff_len"))
    t = Table(Key("seq_len", "max_length"), Key("packing", "packing"), prefix="--")
    assert list(t.shown("seq_len batching=packing loss", loss="text").items()) == [
        ("seq_len", "--max_length"),
        ("batching", "--packing"),
        ("loss", "text"),
    ]
