"""axolotl's release lines: each read at its tag in github.com/axolotl-ai-cloud/axolotl (`git show TAG:PATH`; the
config schema is src/axolotl/utils/config/models/input/v0_4_1/__init__.py from v0.5.0 to v0.7.1, then
src/axolotl/utils/schemas/{config,training}.py). What moved between them:
- micro_batch_size, gradient_accumulation_steps and sequence_len had no default at v0.4.0, which has no schema:
  utils/config.py:47-52 (normalize_config) computes the batch from micro_batch_size and gradient_accumulation_steps,
  None for either stops it; 1, 1 and 512 from v0.5.0 (v0_4_1/__init__.py:396-398, 663).
- the optimizer: adamw_hf (transformers' own AdamW, planned as the foreach step, the hungrier) through v0.7.1
  (v0.4.0 core/trainer_builder.py:813-814 `optim` adamw_hf where unset; v0.5.0 v0_4_1/__init__.py:421-432, v0.7.0
  :494-506); adamw_torch_fused from v0.8.0 (schemas/training.py:53-55, PR #2425 4d92a68a9).
- GRPO came at v0.7.0 (core/trainer_builder.py:1014 rl grpo) on the TRL it pins, whose GRPOConfig decides beta where
  the trl section leaves it None (v0.7.0 v0_4_1/trl.py:14; v0.12.0 schemas/trl.py:13-14): trl==0.15.0 (v0.7.0
  requirements.txt:21) .. 0.18.2 (v0.11.0 requirements.txt:21) keep beta 0.04, a reference model (trl v0.15.0
  trl/trainer/grpo_config.py:213-214); trl==0.21.0 (v0.12.0 requirements.txt:22) .. 1.9.0 (0.19.0's metadata)
  beta 0.0 (trl v0.19.0 grpo_config.py:412-413). Every pinned TRL (0.12.0 at v0.5.0 .. 1.9.0) scores DPO and GRPO
  from the whole logits (trl v0.12.0 dpo_trainer.py:1274; planner.frameworks.trl.WHOLE), each line's meanings
  taken from TRL's own line (_trl); axolotl passes max_completion_length None where its trl section leaves it out.
- keys only some releases take (SPANS, each tag's schema fields; v0.4.0 the cfg.* keys its src reads):
  activation_offloading and attn_implementation (v0.12.0 schemas/config.py:402, 554; before it the flash_attention
  / sdp_attention bools, which stay, deprecated), context_parallel_size (v0.12.0; sequence_parallel_degree from
  v0.8.0 config.py:255), tensor_parallel_size (v0.12.0 config.py:696), chunked_cross_entropy (v0.11.0), the trl
  section (v0.7.0), precompute_ref_log_probs (v0.5.0), freeze_mm_modules (v0.17.0 config.py:620). A run's keys
  narrow the lines its files allow (planner.intake.releases.for_entry). gradient_checkpointing's values moved too:
  "unsloth" (v0.5.0-v0.9.x: each layer's input offloaded to the host, v0.5.0 utils/models.py:380-381,
  utils/gradient_checkpointing/unsloth.py:19-30), "offload" from v0.8.0 (config.py:179).
- optimizer: muon from v0.8.0 (axolotl-contribs-mit's MuonOptimizerFactory: no state for the vectors); v0.14.0
  (contribs 0.0.6) runs DistMuon where a device mesh is built (several GPUs: AdamW's states for the vectors) and
  takes FSDP2 beside it (its own line, 0.14, which also moved to transformers 5.0.0); v0.12.0-v0.13.x (contribs
  0.0.5) refuse Muon with FSDP (validation.py:753-758) and run the plain factory on several GPUs too.
What did not move: gradient_checkpointing False (v0.5.0 v0_4_1/__init__.py:656-657 .. 0.19.0 config.py:606), bf16
"auto" and the model loaded in that dtype (v0.4.0 utils/config.py:66-72, 87-92 .. 0.19.0), sequence_len 512 and
micro_batch_size 1 from v0.5.0, sample_packing off (None) and eval_sample_packing following it; the transformers
pins (4.37.0 at v0.4.0 requirements.txt:4, 4.46.1 v0.5.0, 4.48.3 v0.7.0, 4.50.3 v0.8.0, 4.55.0 v0.12.0, 5.0.0
v0.14.0) decide no default, since axolotl sets `optim` itself; each line's newest pin (`transformers_newest`) decides
how the model classes whose head moved between transformers releases compute their loss (Traits.half_loss:
Llama-4's composite in the logits' dtype from 4.51.0 until 5.17.0): 4.37.0 (v0.4.0 requirements.txt:4), none at
v0.6.0 (requirements.txt:15 transformers>=4.46.3: unsaid), 4.49.0 (v0.7.1 :16), 4.53.1 (v0.11.0.post1 :16), 5.16.1
(0.19.0's metadata). rl kto (TRL's KTOTrainer at each pin) is planned from v0.17.0 (trl 1.5.1) alone: kto.py.
Adding a release is one Release."""

from planner.frameworks.base import Default, Release
from planner.frameworks.trl import RELEASES as TRL_LINES

GIT = "axolotl {} src/axolotl/"
V041 = "utils/config/models/input/v0_4_1/__init__.py"
STOPS = "{}: no default (no config schema); utils/config.py:47-52 normalize_config stops without it"
HF_ADAMW = "optimizer adamw_hf, transformers' own AdamW (planned as the foreach step)"
NEWEST_TRANSFORMERS = (5, 16, 1)  # 0.19.0's METADATA Requires-Dist transformers==5.16.1 (the newest line's)
# axolotl-contribs-mit==0.0.3 (v0.8.0 .. v0.11.x requirements.txt) and 0.0.5 (v0.12.0 .. v0.13.x): MuonOptimizerFactory
# on every world size, no parameter under 2-D in the optimizer (muon.py:217-219); Muon refused beside DeepSpeed or FSDP
# (v0.8.0 schemas/config.py:1140-1145 .. v0.13.0 validation.py:753-758). DistMuon and FSDP2 came at v0.14.0 (0.0.6)
PLAIN_MUON = {"muon_vectors": "dropped", "muon_fsdp": False}
# accelerate==1.6.0 (v0.8.1 .. v0.9.x requirements.txt), 1.7.0 (v0.10.0), 1.8.1 (v0.11.0), 1.10.0 (v0.12.0), 1.11.0
# (v0.13.0), 1.12.0 (v0.13.2, v0.14.0): fsdp2_prepare_model casts the whole sharded model to fp32 under mixed
# precision, the frozen base and a 4-bit base's bf16 storage too (Memory.fsdp_frozen_fp32; measured: probes.fsdp_upcast,
# tests/probes/test_fsdp_upcast.py). v0.8.0 pins 1.5.2, which has no FSDP2; v0.15.0 and later pin 1.13.0 (the
# trained parameters alone), so the 0.14 line keeps the newest's False
FSDP_UPCAST = {"fsdp_frozen_fp32": True}
# the caching allocator's expandable segments, which axolotl turns on itself where the environment sets no allocator
# config (torch >= 2.2): 0.19.0 cli/main.py:48 (every `axolotl` command; the `accelerate launch -m axolotl.cli.train`
# it starts inherits the variable) -> utils/__init__.py:81-98 set_pytorch_cuda_alloc_conf; v0.14.0 cli/main.py:47,
# v0.12.0 :49 (patch_optimized_env, utils/__init__.py:37-44), v0.8.0 :104 and cli/train.py:38, v0.7.0 :97; v0.5.0 and
# v0.6.0 in train.py:56-63 (PR #1755 cfc533a7f); v0.4.0 sets none. A command's own PYTORCH_CUDA_ALLOC_CONF decides
# where it gives one (planner.intake.training.read_allocator)
EXPANDABLE = (
    "axolotl/cli/main.py:48 -> utils/__init__.py:81-98 set_pytorch_cuda_alloc_conf: "
    "PYTORCH_CUDA_ALLOC_CONF expandable_segments:True where the environment sets none"
)
NO_EXPANDABLE = "axolotl v0.4.0 sets no PYTORCH_CUDA_ALLOC_CONF (expandable segments from v0.5.0 train.py:56-63)"


def _hf_adamw(tag: str, where: str) -> Default:
    return Default("adamw", f"{GIT.format(tag)}{where}: {HF_ADAMW}")


def _trl(tag: str, pin: str, line: str) -> dict[str, Default]:
    """The DPO/GRPO meanings of the TRL axolotl `tag` pins (`pin`: where), as TRL's own release line
    `line` declares them (planner.frameworks.trl.RELEASES): beta where axolotl's trl section leaves it None (v0.7.0
    v0_4_1/trl.py:14; v0.12.0 schemas/trl.py:13-14), and DPO's and GRPO's log-probs from the whole logits (axolotl's
    AxolotlGRPOTrainer and AxolotlDPOTrainer keep TRL's). Not max_completion_length: axolotl passes its trl section's
    None to GRPOConfig (v0.7.0 core/trainers/grpo/__init__.py:56 .. v0.18.0 :103), never TRL's 256 (the reader)."""
    trl = next(r for r in TRL_LINES if r.name == line)
    said = f"axolotl {tag} {pin}, as trl@{line}: "
    return {k: Default(d.value, said + d.source) for k, d in trl.workload.items() if k in ("beta", "logprobs")}


RELEASES = (
    Release(
        "0.4",
        (0, 4),
        "axolotl v0.4.0 (no config schema: src/axolotl/utils/config.py; requirements.txt:4 transformers==4.37.0)",
        defaults={
            "micro_batch": Default(None, f"{GIT.format('v0.4.0')}{STOPS.format('micro_batch_size')}"),
            "grad_accum": Default(None, f"{GIT.format('v0.4.0')}{STOPS.format('gradient_accumulation_steps')}"),
            "seq_len": Default(None, f"{GIT.format('v0.4.0')}core/trainer_builder.py:770: sequence_len, no default"),
            "optimizer": _hf_adamw("v0.4.0", "core/trainer_builder.py:813-814"),
            "expandable_segments": Default(False, NO_EXPANDABLE),
        },
        adapter={"transformers_newest": (4, 37, 0)},
        notes=("0.4: micro_batch_size, gradient_accumulation_steps, sequence_len required; optimizer adamw_hf",),
    ),
    Release(
        "0.5",
        (0, 5),
        f"axolotl v0.5.0 .. v0.6.0 (src/axolotl/{V041}; requirements.txt:4 transformers==4.46.1 at v0.5.0)",
        defaults={"optimizer": _hf_adamw("v0.5.0", f"{V041}:421-432")},
        adapter={"transformers_newest": ()},  # v0.6.0 requirements.txt:15 transformers>=4.46.3: no newest
        notes=("0.5-0.6: optimizer adamw_hf; no GRPO",),
    ),
    Release(
        "0.7",
        (0, 7),
        f"axolotl v0.7.0 .. v0.7.1 (src/axolotl/{V041}; requirements.txt:21 trl==0.15.0, GRPO)",
        defaults={"optimizer": _hf_adamw("v0.7.0", f"{V041}:494-506")},
        workload=_trl("v0.7.0", "requirements.txt:21 trl==0.15.0", "0.15"),
        adapter={"transformers_newest": (4, 49, 0)},
        notes=("0.7: optimizer adamw_hf; GRPO keeps a reference model (trl 0.15's beta 0.04)",),
    ),
    Release(
        "0.8",
        (0, 8),
        "axolotl v0.8.0 (src/axolotl/utils/schemas/training.py:53-55 adamw_torch_fused) .. v0.11.x",
        workload=_trl("v0.8.0", "requirements.txt:20 trl==0.16.0 (v0.11.0 :21 trl==0.18.2)", "0.15"),
        adapter={"transformers_newest": (4, 53, 1), **PLAIN_MUON, **FSDP_UPCAST},
        notes=("0.8-0.11: GRPO keeps a reference model (trl 0.16-0.18's beta 0.04)",),
    ),
    Release(
        "0.12",
        (0, 12),
        "axolotl v0.12.0 (requirements.txt:22 trl==0.21.0; attn_implementation, activation_offloading) .. v0.13.x",
        # trl==0.21.0 (v0.12.0) .. 0.27.0 (v0.13.2 :20): TRL's lines 0.19 and 0.22, the same beta and head
        workload=_trl("v0.13.2", "requirements.txt:20 trl==0.27.0 (v0.12.0 :22 trl==0.21.0)", "0.22"),
        # v0.13.2 requirements.txt:16 transformers==4.57.6
        adapter={"transformers_newest": (4, 57, 6), **PLAIN_MUON, **FSDP_UPCAST},
        notes=("0.12-0.13: transformers 4.55-4.57; Muon without FSDP, no state for the vectors",),
    ),
    Release(
        "0.14",
        (0, 14),
        "axolotl v0.14.0 (requirements.txt:15 transformers==5.0.0, :71 axolotl-contribs-mit==0.0.6: DistMuon) .. v0.16.x",
        # trl==0.27.1 (v0.14.0 :19) .. 0.29.0 (v0.15.0 .. v0.16.1 :19): TRL's line 0.22
        workload=_trl("v0.14.0", "requirements.txt:19 trl==0.27.1; v0.16.1 :19 trl==0.29.0", "0.22"),
        adapter={"transformers_newest": (5, 5, 0)},  # v0.16.1 requirements.txt:15 transformers==5.5.0
        notes=("0.14-0.16: trl 0.27.1-0.29.0 (rl kto not planned)",),
    ),
    Release(
        "0.17",
        (0, 17),
        "axolotl v0.17.0 (pyproject.toml:23 trl==1.5.1) .. 0.19.0 (trl==1.9.0)",
        # trl==1.5.1 (v0.17.0 pyproject.toml:23), 1.8.0 (v0.18.0 :23), 1.9.0 (0.19.0's metadata): TRL's lines 1.0 and
        # 1.7, the same beta and head, and the same KTO terms (kto_entropy_copy: planner.frameworks.axolotl.kto)
        workload=_trl("0.19.0", "METADATA Requires-Dist trl==1.9.0; v0.17.0 pyproject.toml:23 trl==1.5.1", "1.7"),
    ),
)
V = {r.name: r.first for r in RELEASES}
# key -> (the first version taking it, the first no longer taking it; None: open)
SPANS = {
    "precompute_ref_log_probs": (V["0.5"], None),
    "trl": (V["0.7"], None),
    "sequence_parallel_degree": (V["0.8"], None),
    "chunked_cross_entropy": ((0, 11), None),
    **dict.fromkeys(
        ("attn_implementation", "activation_offloading", "context_parallel_size", "tensor_parallel_size"),
        (V["0.12"], None),
    ),
    "freeze_mm_modules": (V["0.17"], None),
    "reward_model": (V["0.5"], None),  # v0.5.0 v0_4_1/__init__.py:590
    "process_reward_model": (V["0.7"], None),  # v0.7.0 v0_4_1/__init__.py:696
    # v0.8.0 schemas/config.py:178-180 Literal["unsloth", "offload"]; v0.7.1 v0_4_1/__init__.py:781 "unsloth" only
    "gradient_checkpointing=offload": (V["0.8"], None),
    # optimizer: muon from v0.8.0 (schemas/enums.py:54, PR #2367 ae6637415); v0.7.1 v0_4_1/__init__.py:496-508
    # takes transformers' OptimizerNames or its own Literal, neither with muon
    "optimizer=muon": (V["0.8"], None),
    # GaLore's and APOLLO's optim values and their optim_target_modules (v0.5.0 v0_4_1/__init__.py:436, handed to
    # TrainingArguments: core/trainer_builder.py:1533-1536) pass through to transformers' OptimizerNames: galore_adamw
    # and galore_adamw_8bit from transformers 4.39 (4.46.1, v0.5.0's pin: training_args.py:176-177), none at 4.37.0
    # (v0.4.0's pin: training_args.py:139-157), whose axolotl reads no optim_target_modules; apollo_adamw from 4.49.0
    # (training_args.py:188), v0.7.1's pin (requirements.txt:16) and allowed by v0.6.0's transformers>=4.46.3 (:15),
    # not by v0.5.x's 4.46.1-4.46.3 nor v0.7.0's 4.48.3
    **dict.fromkeys(
        ("optim_target_modules", "optimizer=galore_adamw", "optimizer=galore_adamw_8bit"), (V["0.5"], None)
    ),
    "optimizer=apollo_adamw": ((0, 6), None),
}
