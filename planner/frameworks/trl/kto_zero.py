"""TRL 0.x's KTOTrainer by release line (releases.py's 0.14, 0.15, 0.19 and 0.22 lines): which lines plan KTO with the
1.0 line's terms (Framework.kto_entropy_copy, planner.estimate.kto_entropy) and which refuse it, each read at its tag
of github.com/huggingface/trl (trl/trainer/kto_trainer.py; trl/experimental/kto/ from v0.26.0).

CPU steps of each release's own trainer (tests/probes/kto_steps.py: fp32, micro 2 x accum 2, the tiny Llama of
tests/probes/test_rl.py at vocabulary 4,096, rows of 96 tokens; bytes at training, kl-forward, reference-forward;
tests/planner/frameworks/trl/test_kto_zero.py STEPS, test_kto_entropy.py RELEASE_STEPS), against the 1.0 line's plan
of 95,591,424, 75,883,520 and 87,938,048:
- v0.12.0 .. v0.16.x: forward() scores the KL batch first and keeps its logits, a local (v0.14.0 :1061-1063, v0.15.0
  :1064), through the policy's own forward (v0.14.0 :1086, v0.15.0 :1089) until it returns: one whole-logits tensor
  beyond v0.17's, in the step and in the reference's forward (the same forward, v0.14.0 :1234, 1242). v0.12 .. v0.14
  take log_softmax of the whole logits (v0.14.0 :1035), v0.15 selective_log_softmax (v0.15.0 :1038): the same bytes
  measured. trl 0.14.0: 96,048,128 at training (the KL pass inside it, no kl-forward of its own) and 93,128,192 at the
  reference forward (+5.9%, over the plan's peak by 0.5% at training); 0.15.2 within 0.04% of it: refused (KL_HELD).
- v0.17.0 .. v0.29.1: the KL pass in its own method (_compute_kl_logps: v0.17.0 :1197-1224, v0.19.0 :1175, v0.22.0
  :1171), its logits freed on return; index copies of the policy's whole logits (v0.19.0 :1090-1091, v0.22.0
  :1086-1087, v0.29.1 experimental/kto/kto_trainer.py:974-975; the reference's passes drop their logits: v0.22.0
  :1398-1406, v0.29.1 :1233-1241), no entropy; selective_log_softmax's paths as v1.0.0's (trl/trainer/utils.py):
  v1.0.0's structure.
  0.17.0 and 0.19.1 (92,937,216 / 74,733,056 / 90,055,680) and 0.22.2 (92,169,728 / 74,743,808 / 89,288,192): every
  phase within 3.6% (0.19.1 at vocabulary 8,192: 3.9%), the peak under the plan's: planned on the 0.19 and 0.22 lines.
  0.17.x and 0.18.x are read as the 0.15 line (their KTOConfig sets no bf16: fp32 unless given), which refuses KTO and
  names them.
- Rows: through v0.26.x _process_tokens cuts the prompt to max_prompt_length (KTOConfig default 512: v0.19.0
  kto_config.py:117-118, v0.22.0 :123-124) and then the completion to max_length - max_prompt_length (v0.19.0
  kto_trainer.py:198-215, v0.22.0 :200-217), a negative slice when max_length - 2 < max_prompt_length: rows then run
  past max_length (refused: ROWS_UNCUT). v0.27.0 on cuts the completion alone (experimental/kto/kto_trainer.py:201-207).
  The 0.22 line's earlier "untraced" 8.1% was this slice: the probe gave max_length 96 alone, and 0.22.2's default
  max_prompt_length 512 cut every completion to nothing (rows of 33 tokens; v1.0.0 has no max_prompt_length)."""

from planner.frameworks.base import Rule
from planner.frameworks.rules import kind, workload_of

PROMPT_DEFAULT = 512  # KTOConfig's max_prompt_length, v0.12.0 .. v0.26.x (v0.19.0 trl/trainer/kto_config.py:117-118)
INSTEAD = "give --framework trl@0.19 (0.17 .. 0.21) or trl@0.22 (0.22 .. 0.29)"
KL_HELD = Rule(
    "workload",
    "TRL v0.12.0 .. v0.16.x's KTOTrainer keeps the KL pass's whole logits through the policy's forward (v0.14.0 "
    "trl/trainer/kto_trainer.py:1061-1063, 1086; v0.15.0 :1064, 1089), its CPU step 5.9% over the 1.0 line's plan at "
    "the reference forward: not planned; 0.17.x .. 0.18.x run the 0.19 line's KTOTrainer (fp32 unless their files set "
    f"bf16): {INSTEAD}",
    lambda k: kind(k) == "kto",
)


def rows_uncut(knobs: dict) -> bool:
    """KTO whose rows v0.12.0 .. v0.26.x do not cut to max_length: max_length - 2 under max_prompt_length."""
    w = workload_of(knobs)
    return kind(knobs) == "kto" and w is not None and w.max_length - 2 < (w.max_prompt_length or PROMPT_DEFAULT)


ROWS_UNCUT = Rule(
    "workload",
    "TRL v0.12.0 .. v0.26.x's KTOTrainer cuts a row's completion to max_length - max_prompt_length (v0.22.0 "
    "trl/trainer/kto_trainer.py:200-217; KTOConfig's max_prompt_length 512 by default, kto_config.py:123-124), a "
    "negative slice that leaves rows past max_length when max_length - 2 < max_prompt_length: not planned; give "
    "--max-prompt-length at most --max-length - 2",
    rows_uncut,
)
# memplan's KTO file names max_length alone (planner.export.export.trl_args: TRL 1.16's KTOConfig, and v0.27 on, have
# no max_prompt_length), so the line's own default 512 cuts the rows it writes: under 514 they run past max_length
WRITTEN_UNCUT = Rule(
    "workload",
    "memplan writes KTOConfig's max_length alone, and TRL v0.12.0 .. v0.26.x's default max_prompt_length 512 (v0.22.0 "
    "trl/trainer/kto_config.py:123-124) leaves rows past a max_length under 514 (kto_trainer.py:200-217): not "
    "written; give --max-length 514 or more",
    lambda k, w: kind(k) == "kto" and (x := workload_of(k)) is not None and x.max_length - 2 < PROMPT_DEFAULT,
    scope="written",
)
