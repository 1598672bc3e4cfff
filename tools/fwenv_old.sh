#!/usr/bin/env bash
# One venv per older release line memplan writes files for (issue 46 item 4), holding that release and the versions it
# pins or ran with, so tests/planner/export/test_old_releases_parse.py runs each line's own parser on what
# `suggest --framework F@LINE --emit` writes. Built on demand (never by `make fwenv`): tools/fwenv.sh's functions
# (sourced: uv, pip's sources, the shared CPU torch, the stamp that leaves a built venv alone), a venv per version.
# usage: tools/fwenv_old.sh [all|ci|NAME ...]   (default: all; NAME e.g. lf-0.5.3, swift-3.4.1, trl-0.14.0, orl-0.10.1, verl-0.6.1)
#   FWENV_OLD_ROOT=.fwenv-old   FWENV_BASE=.fwenv (its _uv and _torch are linked, not rebuilt, where present)
# Pins: the framework's own upper bounds at the tag where it has them (requirements.txt / pyproject.toml, cited per
#   group), else the releases of its month (LLaMA-Factory before v0.9.0 and TRL name lower bounds only).
set -euo pipefail
OLD=${FWENV_OLD_ROOT:-.fwenv-old}
BASE=${FWENV_BASE:-.fwenv}
mkdir -p "$OLD"
for part in _uv _torch; do
  if [ -d "$BASE/$part" ] && [ ! -e "$OLD/$part" ]; then ln -s "$(cd "$BASE/$part" && pwd)" "$OLD/$part"; fi
done
export FWENV_ROOT=$OLD FWENV_SHARED_TORCH=1
# shellcheck source=tools/fwenv.sh
source "$(dirname "$0")/fwenv.sh"

NUMPY1="numpy==1.26.4 pyarrow==15.0.2 matplotlib==3.8.4"  # transformers and datasets before 2024-06 predate numpy 2
# LLaMA-Factory (llmtuner on PyPI until 0.7.1): requirements.txt at each tag; v0.5.3-v0.8.3 name lower bounds only.
#   the package's __init__ at v0.5.3-v0.7.1 imports its API, web UI and chat too: their requirements.txt rest (gradio
#   <4.0.0 at v0.5.3, >=4.0.0 at v0.6.3 and v0.7.1) at the releases of the month; trl 0.8-0.9 import rich without naming it, and
#   datasets before 3.x needs a pyarrow that still takes numpy 1
LFAPP="scipy==1.12.0 einops==0.7.0 sentencepiece==0.2.0 protobuf==4.25.3 uvicorn==0.29.0 fastapi==0.110.0 sse-starlette==2.0.0 rich==13.7.1"
DEPS[lf-0.5.3]="gradio==3.50.2 jieba==0.42.1 rouge-chinese==1.0.3 nltk==3.8.1 $LFAPP transformers==4.38.2 datasets==2.18.0 accelerate==0.27.2 peft==0.9.0 trl==0.7.11 pydantic==2.6.4 $NUMPY1"
DEPS[lf-0.6.3]="gradio==4.26.0 fire==0.6.0 $LFAPP transformers==4.40.1 datasets==2.19.0 accelerate==0.29.3 peft==0.10.0 trl==0.8.6 pydantic==2.7.1 $NUMPY1"
# v0.7.0 (2024-04-28; its requirements.txt is v0.6.3's plus packaging): the releases of its week, gradio 4.28.3
DEPS[lf-0.7.0]="gradio==4.28.3 fire==0.6.0 $LFAPP transformers==4.40.1 datasets==2.19.0 accelerate==0.29.3 peft==0.10.0 trl==0.8.6 pydantic==2.7.1 $NUMPY1"
DEPS[lf-0.7.1]="gradio==4.36.1 fire==0.6.0 $LFAPP transformers==4.41.2 datasets==2.19.2 accelerate==0.30.1 peft==0.11.1 trl==0.9.4 pydantic==2.7.3 $NUMPY1 rich==13.7.1"
DEPS[lf-0.8.3]="transformers==4.43.4 datasets==2.20.0 accelerate==0.32.1 peft==0.12.0 trl==0.9.6 pydantic==2.8.2 $NUMPY1 rich==13.7.1"
DEPS[lf-0.9.0]="transformers==4.45.0 datasets==2.21.0 accelerate==0.33.0 peft==0.12.0 trl==0.9.6 pydantic==2.9.2 matplotlib==3.10.3 rich==13.7.1 pyarrow==17.0.0"
DEPS[lf-0.9.1]="transformers==4.46.1 datasets==3.1.0 accelerate==1.0.1 peft==0.12.0 trl==0.9.6 pydantic==2.9.2 matplotlib==3.10.3 rich==13.7.1 pyarrow==17.0.0"
DEPS[lf-0.9.2]="transformers==4.49.0 datasets==3.2.0 accelerate==1.2.1 peft==0.12.0 trl==0.9.6 tokenizers==0.21.0 pydantic==2.10.6 matplotlib==3.10.3 rich==13.7.1 pyarrow==17.0.0"
DEPS[lf-0.9.3]="transformers==4.52.4 datasets==3.6.0 accelerate==1.7.0 peft==0.15.2 trl==0.9.6 tokenizers==0.21.1 omegaconf==2.3.0 pydantic==2.10.6 matplotlib==3.10.3 rich==13.7.1 pyarrow==17.0.0"
DEPS[lf-0.9.4]="transformers==4.57.1 datasets==4.0.0 accelerate==1.11.0 peft==0.17.1 trl==0.24.0 omegaconf==2.3.0 pydantic==2.12.5 matplotlib==3.10.3"
# TRL: pyproject/setup.py names lower bounds only (transformers>=4.46.0 at v0.14.0): the transformers, accelerate and
#   datasets of each release's month; the forks r1-v (setup.py:65 trl==0.14.0) check with trl-0.14.0's GRPOConfig
TRLDEPS="rich==13.9.4 pyyaml==6.0.2"
DEPS[trl-0.14.0]="transformers==4.48.2 accelerate==1.3.0 datasets==3.2.0 $TRLDEPS"
DEPS[trl-0.15.2]="transformers==4.49.0 accelerate==1.4.0 datasets==3.3.2 $TRLDEPS"
# VLM-R1 (90052f4 src/open-r1-multimodal/setup.py:45-66: trl==0.17.0, transformers==4.49.0, deepspeed==0.15.4,
#   accelerate>=1.2.1, datasets>=3.2.0): its own GRPOConfig subclasses TrainingArguments, its scripts' argument classes
#   TRL's ScriptArguments and ModelConfig (tests/planner/export/validators/fork_validate.py)
DEPS[trl-0.17.0]="transformers==4.49.0 accelerate==1.6.0 datasets==3.5.0 $TRLDEPS"
DEPS[trl-0.19.1]="transformers==4.53.1 accelerate==1.8.1 datasets==3.6.0 $TRLDEPS"
DEPS[trl-0.22.2]="transformers==4.56.2 accelerate==1.10.1 datasets==4.1.1 $TRLDEPS"
DEPS[trl-1.0.0]="transformers==5.6.0 accelerate==1.13.0 datasets==4.8.4 $TRLDEPS"
DEPS[trl-1.10.0]="transformers==5.19.0 accelerate==1.15.0 datasets==4.8.4 $TRLDEPS"
# Hugging Face Trainer's 4 lines (planner.frameworks.hf HF_RELEASES "4", "4.54"): transformers at each line's upper
#   release and the accelerate, datasets and TRL of its month (the LoRA flags written are TRL's ModelConfig's, as the
#   reader reads them: planner/intake/loraargs.py); TrainingArguments' own HfArgumentParser reads what memplan writes
#   (tests/planner/export/validators/trl_validate.py TrainingArguments)
DEPS[hf-4.53.0]="transformers==4.53.0 accelerate==1.8.1 datasets==3.6.0 trl==0.19.1 $TRLDEPS"
DEPS[hf-4.57.1]="transformers==4.57.1 accelerate==1.10.1 datasets==4.1.1 trl==0.24.0 $TRLDEPS"
# HSDP at hf@4 and trl@0.19 (sweep tier): the files pin accelerate>=1.10.1 (its ParallelismConfig reads the mesh
#   variables), past the 1.8.1 of those lines' month: the line's release with accelerate 1.10.1 (transformers named, as
#   uv's resolution otherwise moves it past the line)
DEPS[hf-4.53.0-mesh]="transformers==4.53.0 accelerate==1.10.1 datasets==3.6.0 trl==0.19.1 $TRLDEPS"
DEPS[trl-0.19.1-mesh]="transformers==4.53.1 accelerate==1.10.1 datasets==3.6.0 $TRLDEPS"
# ms-swift 3.x: requirements/framework.txt at v3.0.3, v3.4.1, v3.7.3 (transformers <4.49, <4.53, <4.56; peft <0.15,
#   <0.16, <0.18; trl <0.12, <0.18, <0.21; numpy<2.0 before 3.7), each at the highest release its bounds allow, and the
#   small packages swift.llm.argument imports
#   (tensorboard's grpcio named, so a new release does not float in: CI's build of 2026-12-06 resolved grpcio 1.85.4
#   on the day of its release, and its install then found no such version)
SWDEPS="rich==13.9.4 tensorboard==2.16.2 grpcio==1.85.3 addict==2.4.0 attrdict==2.0.1 binpacking==1.5.2 dacite==1.9.2 einops==0.8.1 pillow==11.2.1 sortedcontainers==2.4.0 simplejson==3.20.1 pyyaml==6.0.2"
DEPS[swift-3.0.3]="transformers==4.48.3 peft==0.14.0 trl==0.11.4 datasets==3.2.0 accelerate==1.2.1 modelscope==1.22.3 $NUMPY1 $SWDEPS"
DEPS[swift-3.4.1]="transformers==4.52.4 peft==0.15.2 trl==0.17.0 datasets==3.3.2 accelerate==1.7.0 modelscope==1.26.0 $NUMPY1 $SWDEPS"
DEPS[swift-3.7.3]="transformers==4.55.4 peft==0.17.1 trl==0.20.0 datasets==3.3.2 accelerate==1.10.1 modelscope==1.29.2 $SWDEPS"
# ms-swift's 3.9 line (v3.9.0 .. v3.12.x) at its newest, v3.12.6 (requirements/framework.txt: transformers <4.58,
#   peft <0.19, trl <0.25, datasets <4.0; json_repair, which its swift/utils/utils.py imports)
DEPS[swift-3.12.6]="transformers==4.57.1 peft==0.17.1 trl==0.24.0 datasets==3.6.0 accelerate==1.11.0 modelscope==1.31.0 json_repair==0.52.0 $SWDEPS"
# OpenRLHF (train_ppo_ray/train_dpo/train_sft's parser and __main__ checks, tests/.../validators/openrlhf_validate.py):
#   transformers, deepspeed and ray at the wheel's own pins (METADATA Requires-Dist: 0.10.1 transformers==5.5.3
#   deepspeed==0.18.9 ray==2.48.0; 0.8.9 transformers==4.54.1 deepspeed==0.17.4 ray==2.48.0), the rest the releases
#   of the month; vllm and flash-attn are not installed: the validator stands in empty modules for them (imported by
#   trainer/ray/vllm_engine.py and models/ at module level, never reached before train() builds the trainer)
ORLDEPS="pylatexenc==2.11 aiohttp==3.12.15 torchdata==0.11.0 einops==0.8.1 jsonlines==4.0.0 loralib==0.1.2 tqdm==4.67.1"
DEPS[orl-0.10.1]="transformers==5.5.3 deepspeed==0.18.9 ray==2.48.0 peft==0.18.1 accelerate==1.13.0 datasets==4.8.4 pillow==12.1.1 $ORLDEPS"
DEPS[orl-0.8.9]="transformers==4.54.1 deepspeed==0.17.4 ray==2.48.0 peft==0.17.0 accelerate==1.9.0 datasets==4.0.0 pillow==11.3.0 $ORLDEPS"
# verl 0.6.x: setup.py install_requires (numpy<2.0.0, pyarrow>=19.0.0, tensordict>=0.8.0,<=0.10.0,!=0.9.0; the rest
#   unbounded) at the releases of its month (2025-10); datasets 4.1.1 needs pyarrow>=21.0.0
VERLDEPS="transformers==4.57.1 hydra-core==1.3.2 omegaconf==2.3.0 tensordict==0.10.0 ray==2.50.0 codetiming==1.4.0 peft==0.17.1 accelerate==1.10.1 datasets==4.1.1 numpy==1.26.4 pyarrow==21.0.0 pandas==2.2.3 packaging==25.0 pylatexenc==2.11"
DEPS[verl-0.6.0]="$VERLDEPS"
DEPS[verl-0.6.1]="$VERLDEPS"
ALL="hf-4.53.0 hf-4.57.1 hf-4.53.0-mesh trl-0.19.1-mesh lf-0.5.3 lf-0.6.3 lf-0.7.0 lf-0.7.1 lf-0.8.3 lf-0.9.0 lf-0.9.1 lf-0.9.2 lf-0.9.3 lf-0.9.4
  trl-0.14.0 trl-0.15.2 trl-0.17.0 trl-0.19.1 trl-0.22.2 trl-1.0.0 trl-1.10.0
  swift-3.0.3 swift-3.4.1 swift-3.7.3 swift-3.12.6 orl-0.10.1 orl-0.8.9 verl-0.6.0 verl-0.6.1"

# the package a venv installs (--no-deps), from its name PREFIX-VERSION[-mesh]: the prefix's package at that version;
#   the exceptions by name (LLaMA-Factory was llmtuner on PyPI before 0.7.1)
declare -A PREFIX_PKG=([lf]=llamafactory [trl]=trl [hf]=transformers [swift]=ms-swift [orl]=openrlhf [verl]=verl)
declare -A RENAMED=([lf-0.5.3]=llmtuner [lf-0.6.3]=llmtuner [lf-0.7.0]=llmtuner)
for name in $ALL; do
  version=${name#*-}
  PKG[$name]="${RENAMED[$name]:-${PREFIX_PKG[${name%%-*}]}}==${version%-mesh}"
done

# a plan that shards with ZeRO names a DeepSpeed JSON, which TrainingArguments reads through deepspeed itself: the
#   newest venvs' deepspeed (tools/fwenv.sh; its sdist builds with no ops on a CPU host) in every one but those that
#   cap it: LLaMA-Factory v0.9.3 and v0.9.4 check deepspeed>=0.10.0,<=0.16.9 (v0.9.4 hparams/parser.py:200)
for name in $ALL; do
  case $name in
    lf-0.9.3 | lf-0.9.4) DEPS[$name]+=" deepspeed==0.16.9" ;;
    trl-0.17.0) DEPS[$name]+=" deepspeed==0.15.4" ;;  # VLM-R1's own pin
    orl-* | verl-*) ;;  # OpenRLHF pins its own deepspeed; verl's FSDP scripts name none
    *) DEPS[$name]+=" deepspeed==0.19.8" ;;
  esac
done

# CI (`make fwenv-old`, which `make test` depends on): one venv a written line, each line once, and the GRPO fork
#   VLM-R1's pins (trl-0.17.0). The sweep tier (`tools/fwenv_old.sh all`) adds the other ends of LLaMA-Factory's 0.8
#   line (0.9.0), verl's 0.6 (0.6.0) and hf@4.54 (4.57.1), and hf@4's and trl@0.19's HSDP (their -mesh venvs)
CI="lf-0.5.3 lf-0.6.3 lf-0.7.0 lf-0.7.1 lf-0.8.3 lf-0.9.1 lf-0.9.2 lf-0.9.3 lf-0.9.4
  trl-0.14.0 trl-0.15.2 trl-0.17.0 trl-0.19.1 trl-0.22.2 trl-1.0.0 trl-1.10.0
  swift-3.0.3 swift-3.4.1 swift-3.7.3 swift-3.12.6 orl-0.10.1 orl-0.8.9 verl-0.6.1 hf-4.53.0"

one() {  # setup_one, timed, each line it prints named (the builds run side by side); a failed build is tried once
  #   more after 30 s (an index can list a release before it serves its files: CI's build of 2026-12-06 stopped on
  #   grpcio 1.85.4, the day of its release). Not in an if or ||: bash ignores set -e in what a condition runs.
  local start rc
  start=$(date +%s)
  set +e
  (set -e; setup_one "$1" 2>&1 | sed -u "s|^|[$1] |")
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "[$1] failed; once more in 30 s"
    sleep 30
    (set -e; setup_one "$1" 2>&1 | sed -u "s|^|[$1] |")
    rc=$?
  fi
  set -e
  echo "$1: $(($(date +%s) - start)) s"
  return $rc
}

# FWENV_OLD_JOBS builds at a time (default 2: uv's downloads and links wait on the network and the disk as much as on
#   the 2 cores; uv's cache locks make side-by-side builds safe). The shared torch first, once. The 22 of `ci` from an
#   empty uv cache: 393 s with 92 s of CPU on 2 cores at load ~10 (2026-12-05, docs/tests.md).
names=${*:-all}
case $names in all) names=$ALL ;; ci) names=$CI ;; esac
shared_torch
jobs=${FWENV_OLD_JOBS:-2} failed=0
for name in $names; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || failed=1; done
  one "$name" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || failed=1; done
exit $failed
