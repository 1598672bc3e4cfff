"""The tuners the frameworks' configurations name (planner/intake/tuners.py): DoRA and modules_to_save read from each
framework's own keys, LoRA+ read as LoRA, and every tuner or optimizer memplan does not plan refused in one line naming
its key, never planned as LoRA."""

from types import SimpleNamespace

import pytest

from planner import intake
from planner.errors import BadInput

LF = "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\ncutoff_len: 1024\n"
SWIFT = "swift sft --model Qwen/Qwen2.5-7B --max_length 1024 "
AXOLOTL = "base_model: Qwen/Qwen2.5-7B\nsequence_len: 1024\nmicro_batch_size: 1\n"


def _read(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return intake.read([str(path)])


@pytest.mark.parametrize(
    "name,text",
    [
        ("lf.yaml", LF + "finetuning_type: lora\nuse_dora: true\nadditional_target: embed_tokens,lm_head\n"),
        ("train.sh", SWIFT + "--tuner_type lora --use_dora true --modules_to_save embed_tokens lm_head\n"),
        (
            "ax.yaml",
            AXOLOTL + "adapter: lora\nlora_r: 8\npeft_use_dora: true\nlora_modules_to_save: [embed_tokens, lm_head]\n",
        ),
        (
            "train.py",
            (
                "from peft import LoraConfig\nfrom trl import SFTConfig\nSFTConfig(max_length=1024)\n"
                "LoraConfig(r=8, use_dora=True, modules_to_save=['embed_tokens', 'lm_head'])\n"
            ),
        ),
    ],
)
def test_dora_and_modules_to_save_are_read_from_each_frameworks_keys(tmp_path, name, text):
    reading = _read(tmp_path, name, text)
    assert (reading.request.get("lora_variant"), reading.request.get("lora_train_embeddings")) == ("dora", True)
    assert reading.request["lora_rank"] > 0
    assert not [line for line in reading.unplanned if "dora" in line.lower() or "save" in line.lower()]


def test_a_head_alone_in_modules_to_save_is_planned_with_both_and_says_so(tmp_path):
    reading = _read(tmp_path, "train.sh", SWIFT + "--modules_to_save lm_head score\n")
    assert reading.request["lora_train_embeddings"] is True
    assert any("only the head" in line for line in reading.unplanned)
    assert any("score trained in full" in line for line in reading.unplanned)


def test_lora_plus_is_loras_memory(tmp_path):
    """ms-swift's --optimizer lorap (LoRA+: the B factors' learning rate scaled) keeps LoRA's states: no line."""
    reading = _read(tmp_path, "train.sh", SWIFT + "--optimizer lorap --lorap_lr_ratio 16\n")
    assert reading.request["lora_rank"] == 8 and reading.request.get("lora_variant", "lora") == "lora"
    assert not [line for line in reading.unplanned if "optimizer" in line]


@pytest.mark.parametrize(
    "name,text,says",
    [
        ("train.py", "from peft import AdaLoraConfig\nAdaLoraConfig(init_r=12, total_step=10)\n", "AdaLoRA"),
        ("lf.yaml", LF + "finetuning_type: adalora\n", "finetuning_type: adalora: AdaLoRA"),
        ("train.sh", SWIFT + "--tuner_type fourierft\n", "--tuner_type fourierft: FourierFT"),
        ("lf.yaml", LF + "finetuning_type: adapter\n", "finetuning_type: adapter: bottleneck adapters"),
        (
            "train.sh",
            SWIFT + "--tuner_type llamapro --llamapro_num_new_blocks 4 --llamapro_num_groups 2\n",
            "--llamapro_num_groups 2: LLaMA-Pro's new blocks in 2 groups",
        ),
        ("train.sh", SWIFT + "--train_type longlora\n", "--train_type longlora"),
        ("train.sh", SWIFT + "--use_galore true --galore_quantization true\n", "Q-GaLore"),
        ("lf.yaml", LF + "finetuning_type: oft\noft_rank: 8\noft_block_size: 0\n", "oft_rank: 8: OFT by its block"),
        ("lf.yaml", LF + "finetuning_type: full\noptim: galore_adafactor\n", "GaLore's projected Adafactor"),
        ("lf.yaml", LF + "finetuning_type: full\noptim: galore_adamw_layerwise\n", "layer-wise GaLore"),
        ("lf.yaml", LF + "finetuning_type: freeze\nfreeze_trainable_layers: 0\n", "no layer trained"),
        (
            "lf.yaml",
            LF + "finetuning_type: freeze\nfreeze_trainable_layers: -4\nuse_llama_pro: true\n",
            "freeze_trainable_layers -4 (no layer trained)",
        ),
        ("lf.yaml", LF + "finetuning_type: freeze\nfreeze_trainable_modules: mlp\n", "some modules of a layer"),
        ("lf.yaml", LF + "finetuning_type: freeze\nfreeze_extra_modules: lm_head\n", "extra modules trained"),
        ("ax.yaml", AXOLOTL + "adapter: vera\n", "adapter: vera: VeRA"),
        ("ax.yaml", AXOLOTL + "optimizer: muonclip\n", "MuonClip"),
        ("ax.yaml", AXOLOTL + "optimizer: ademamix_8bit\n", "AdEMAMix's three states"),
        ("ax.yaml", AXOLOTL + "bf16: true\noptimizer: optimi_adamw\n", "optimizer: optimi_adamw: torch-optimi's AdamW"),
        (
            "lf.yaml",
            LF + "finetuning_type: full\nuse_badam: true\n",
            "use_badam: True: BAdam's block-wise updates, as ",
        ),
        ("lf.yaml", LF + "finetuning_type: full\nuse_adam_mini: true\n", "Adam-mini's reduced states, as LLaMA-Fa"),
        ("lf.yaml", LF + "finetuning_type: full\noptim: paged_ademamix_32bit\n", "AdEMAMix's three states"),
        ("lf.yaml", LF + "finetuning_type: full\noptim: stable_adamw\n", "optim: stable_adamw: torch-optimi's Stable"),
        ("ax.yaml", AXOLOTL + "optimizer: grokadamw\n", "GrokAdamW's three fp32 states"),
        ("lf.yaml", LF + "finetuning_type: full\noptim: adamw_anyprecision\n", "AnyPrecisionAdamW"),
    ],
)
def test_a_tuner_not_planned_is_refused_in_one_line(tmp_path, name, text, says):
    with pytest.raises(BadInput) as e:
        _read(tmp_path, name, text)
    message = str(e.value)
    assert says in message and "not planned" in message and "\n" not in message


@pytest.mark.parametrize(
    "name,text,want",
    [
        (
            "lf.yaml",
            LF + "finetuning_type: full\nuse_galore: true\ngalore_rank: 64\noptim: adamw_torch\n",
            ("galore-adamw", 64),
        ),
        ("lf.yaml", LF + "finetuning_type: full\nuse_apollo: true\noptim: adamw_torch\n", ("apollo-adamw", 16)),
        ("lf.yaml", LF + "finetuning_type: full\nuse_muon: true\n", ("muon", None)),
        ("train.sh", SWIFT + "--tuner_type full --use_galore true --galore_rank 64\n", ("galore-adamw", 64)),
        ("train.sh", SWIFT + "--tuner_type full --optimizer muon\n", ("muon", None)),
        ("train.sh", SWIFT + "--tuner_type full --optimizer muonclip\n", ("muonclip", None)),
        (
            "ax.yaml",
            AXOLOTL + "optimizer: galore_adamw_8bit\noptim_args: rank=32\noptim_target_modules: all_linear\n",
            ("galore-adamw-8bit", 32),
        ),
        (
            "train.py",
            (
                "from trl import SFTConfig\nSFTConfig(max_length=1024, optim='apollo_adamw', optim_args='rank=256', "
                "optim_target_modules='all-linear')\n"
            ),
            ("apollo-adamw", 256),
        ),
    ],
)
def test_galore_apollo_and_muon_are_read_into_the_optimizer_fields(tmp_path, name, text, want):
    """Each framework's own keys: LLaMA-Factory's use_galore / use_apollo / use_muon with their ranks (16 by default),
    ms-swift's --use_galore, --optimizer muon and muonclip, transformers' optim with optim_args rank= (axolotl, HF, TRL)."""
    reading = _read(tmp_path, name, text)
    assert (reading.request["optimizer"], reading.request.get("optimizer_rank")) == want


@pytest.mark.parametrize(
    "name,text",
    [
        ("lf.yaml", LF + "finetuning_type: full\nuse_galore: true\noptim: paged_adamw_8bit\n"),
        ("train.sh", SWIFT + "--tuner_type full --use_galore true --optim paged_adamw_8bit\n"),
    ],
)
def test_galore_over_a_paged_8bit_optim_is_galore_8bit_with_a_note_on_its_paged_states(tmp_path, name, text):
    """LLaMA-Factory and ms-swift build GaLoreAdamW8bit with is_paged on a paged optim; memplan plans its states."""
    reading = _read(tmp_path, name, text)
    assert reading.request["optimizer"] == "galore-adamw-8bit"
    assert any("paged 8-bit states" in n for n in reading.unplanned)


@pytest.mark.parametrize(
    "name,text",
    [
        ("lf.yaml", LF + "finetuning_type: full\nuse_apollo: true\napollo_proj: svd\noptim: adamw_torch\n"),
        (
            "ax.yaml",
            AXOLOTL + "optimizer: apollo_adamw\noptim_args: rank=32,proj=svd\noptim_target_modules: [q_proj]\n",
        ),
        (
            "train.py",
            "from trl import SFTConfig\nSFTConfig(max_length=1024, optim='apollo_adamw', optim_args='proj=svd')\n",
        ),
    ],
)
def test_apollo_over_an_svd_projector_is_refused(tmp_path, name, text):
    """APOLLO's proj svd (GaLore's SVD projector under APOLLO's scaling) is not planned as its random one."""
    with pytest.raises(BadInput, match="proj svd"):
        _read(tmp_path, name, text)


@pytest.mark.parametrize(
    "name,text",
    [
        (
            "lf.yaml",
            LF + "finetuning_type: full\nuse_galore: true\ngalore_proj_type: reverse_std\noptim: adamw_torch\n",
        ),
        ("train.sh", SWIFT + "--tuner_type full --use_galore true --galore_proj_type reverse_std\n"),
        (
            "ax.yaml",
            AXOLOTL
            + "optimizer: galore_adamw\noptim_args: rank=32,proj_type=reverse_std\noptim_target_modules: [q_proj]\n",
        ),
        (
            "train.py",
            (
                "from trl import SFTConfig\nSFTConfig(max_length=1024, optim='galore_adamw', optim_args='proj_type=reverse_std', "
                "optim_target_modules=['q_proj'])\n"
            ),
        ),
    ],
)
def test_galores_proj_type_is_read_as_the_optimizer_projection(tmp_path, name, text):
    """LLaMA-Factory's galore_proj_type, ms-swift's --galore_proj_type, transformers' optim_args proj_type= (axolotl,
    TRL): the side each target is projected on, reverse_std -> reverse-std; a name GaLore has no branch for, refused."""
    assert _read(tmp_path, name, text).request["optimizer_projection"] == "reverse-std"
    with pytest.raises(BadInput, match="proj_type sideways"):
        _read(tmp_path, name, text.replace("reverse_std", "sideways"))


def test_apollos_proj_type_other_than_std_is_refused(tmp_path):
    """LLaMA-Factory's apollo_proj_type left / right: APOLLO's channel-wise scaling fails on the other side."""
    text = LF + "finetuning_type: full\nuse_apollo: true\napollo_proj_type: left\noptim: adamw_torch\n"
    from planner.config.spec import Knobs

    assert _read(tmp_path, "lf.yaml", text).request["optimizer_projection"] == "left"
    with pytest.raises(ValueError, match="memplan plans APOLLO's std"):
        Knobs(framework="llamafactory", optimizer="apollo-adamw", optimizer_projection="left")


def test_lora_with_galore_is_refused_as_llamafactory_refuses_it():
    from planner.config.spec import Knobs

    with pytest.raises(ValueError, match="without LoRA"):
        Knobs(framework="llamafactory", optimizer="galore-adamw", lora_rank=8)
    with pytest.raises(ValueError, match="without DeepSpeed or FSDP"):
        Knobs(framework="llamafactory", optimizer="muon", zero_stage=2)
    with pytest.raises(ValueError, match="cannot run --optimizer muon"):
        Knobs(framework="hf", optimizer="muon")


def test_muonclip_is_ms_swift_4s_alone_and_refused_where_it_is_not_planned():
    """ms-swift's MuonClip (swift/optimizers/muonclip.py, from v4.0.0): planned on its 4 line without DeepSpeed or FSDP;
    refused on 3.x, under eager attention (its tracker's fp32 copy of the scores), under ZeRO, and by the frameworks
    without it."""
    from planner.config.spec import Knobs

    assert Knobs(framework="swift", optimizer="muonclip", lora_rank=8).optimizer == "muonclip"
    assert Knobs(framework="swift", release="4", optimizer="muonclip").optimizer == "muonclip"
    with pytest.raises(ValueError, match="from v4.0.0"):
        Knobs(framework="swift", release="3.9", optimizer="muonclip")
    with pytest.raises(ValueError, match="under eager attention"):
        Knobs(framework="swift", optimizer="muonclip", attention="eager")
    with pytest.raises(ValueError, match="without DeepSpeed or FSDP"):
        Knobs(framework="swift", optimizer="muonclip", zero_stage=2)
    for framework in ("llamafactory", "axolotl", "hf"):
        with pytest.raises(ValueError, match="cannot run --optimizer muonclip"):
            Knobs(framework=framework, optimizer="muonclip")


def test_transformers_layerwise_galore_is_a_step_in_backward_and_its_command_reads_back(tmp_path):
    """optim galore_adamw_layerwise (trainer_optimizer.py:164-184: one optimizer a parameter, stepped in its gradient's
    hook) is optimizer_in_backward; the regex a command line writes for optim_target_modules reads back as names."""
    text = (
        "torchrun --nproc_per_node 1 train.py --model_name_or_path Qwen/Qwen2.5-7B --max_length 1024 "
        "--optim galore_adamw_layerwise --optim_target_modules '.*\\.(q_proj|v_proj)' --optim_args rank=64\n"
    )
    r = _read(tmp_path, "train.sh", text).request
    assert (r["optimizer"], r["optimizer_in_backward"], r["optimizer_rank"]) == ("galore-adamw", True, 64)
    assert r["optimizer_targets"] == "q_proj,v_proj"


@pytest.mark.parametrize(
    "flags,want",
    [
        ("--tuner_type adalora --adalora_init_r 16", ("adalora", 16, 0.05)),  # AdaLoRA takes --lora_dropout
        ("--tuner_type adalora", ("adalora", 12, 0.05)),  # tuner_args.py:176: adalora_init_r 12
        ("--tuner_type vera --vera_dropout 0.1", ("vera", 256, 0.1)),  # tuner_args.py:165,167
        ("--train_type adalora --adalora_init_r 8", ("adalora", 8, 0.05)),  # 3.x's name of --tuner_type
    ],
)
def test_swift_adalora_and_vera_are_read_at_their_own_rank(tmp_path, flags, want):
    """ms-swift's --tuner_type adalora | vera (4.6 swift/pipelines/train/tuner.py:255-306): the rank is init_r or
    vera_rank, not --lora_rank; written back with the same flags."""
    from planner.frameworks.swift.writer import tuner_flags

    r = _read(tmp_path, "train.sh", SWIFT + flags + " --lora_rank 64\n").request
    assert (r["lora_variant"], r["lora_rank"], r["lora_dropout"]) == want
    plan = SimpleNamespace(
        knobs=SimpleNamespace(release=None),
        lora_rank=want[1],
        lora_variant=want[0],
        lora_dropout=want[2],
        lora_targets="all-linear",
        lora_train_embeddings=False,
        lora_ends="none",
        lora_vision=False,
        quant="none",
    )
    written = dict(tuner_flags(plan, SimpleNamespace(vision=None)))
    rank_flag = "adalora_init_r" if want[0] == "adalora" else "vera_rank"
    assert written["tuner_type"] == want[0] and written[rank_flag] == want[1] and "lora_rank" not in written


@pytest.mark.parametrize("framework", ["llamafactory", "axolotl", "hf", "trl", "accelerate"])
@pytest.mark.parametrize("variant", ["adalora", "vera"])
def test_frameworks_without_adalora_or_vera_refuse_them_in_one_line(framework, variant):
    from planner.config.spec import Knobs
    from planner.frameworks import FRAMEWORKS

    knobs = Knobs(lora_rank=8, lora_variant=variant).model_dump()
    field, why = FRAMEWORKS[framework].cannot(knobs)
    assert field == "lora_variant" and f"--lora-variant {variant}" in why and "\n" not in why
    assert FRAMEWORKS["swift"].cannot(knobs) is None


@pytest.mark.parametrize(
    "flags,want",
    [
        ("--tuner_type adapter --adapter_length 64", 64),  # 4.6 tuner_args.py:172
        ("--tuner_type adapter --target_modules q_proj --lora_dropout 0.1", 128),  # targets and dropout unread
        ("--train_type adapter --adapter_act relu", 128),  # 3.x's name; v3.12.6 tuner_args.py:192-193
    ],
)
def test_swift_bottleneck_adapter_is_read_at_its_length(tmp_path, flags, want):
    """ms-swift's --tuner_type adapter (tuner.py:280-293): one adapter after each decoder layer's MLP at
    --adapter_length; --target_modules and --lora_dropout have nothing to act on (said, not read)."""
    reading = _read(tmp_path, "train.sh", SWIFT + flags + " --lora_rank 8\n")
    r = reading.request
    assert (r["lora_variant"], r["lora_rank"], r.get("lora_dropout", 0.0)) == ("adapter", want, 0.0)
    assert r.get("lora_targets", "all-linear") == "all-linear"


@pytest.mark.parametrize(
    "framework", ["llamafactory", "axolotl", "hf", "trl", "accelerate", "deepspeed", "openrlhf", "memplan"]
)
def test_frameworks_without_a_bottleneck_adapter_refuse_it_in_one_line(framework):
    from planner.config.spec import Knobs
    from planner.frameworks import FRAMEWORKS

    knobs = Knobs(lora_rank=64, lora_variant="adapter", framework="swift").model_dump()
    field, why = FRAMEWORKS[framework].cannot(knobs)
    assert field == "lora_variant" and "--lora-variant adapter" in why and "\n" not in why
    assert FRAMEWORKS["swift"].cannot(knobs) is None


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("train.yaml", "model_name_or_path: Qwen/Qwen2.5-0.5B\noptim: galore_adamw\nmax_length: 1024\n"),
        (
            "train.py",
            "from trl import SFTConfig\nSFTConfig(max_length=1024, optim='apollo_adamw', optim_args='rank=64')\n",
        ),
    ],
)
def test_transformers_low_rank_without_targets_is_refused_as_the_trainer_refuses_it(tmp_path, name, text):
    """GaLore or APOLLO through HF's Trainer (TRL's configs alike) with no optim_target_modules: the Trainer raises
    before training (transformers 5.25 trainer_optimizer.py:121-122), so memplan refuses it in one line."""
    with pytest.raises(BadInput, match="without optim_target_modules: transformers' Trainer refuses it"):
        _read(tmp_path, name, text)
