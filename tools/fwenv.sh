#!/usr/bin/env bash
# One venv per framework (LLaMA-Factory, ms-swift, axolotl: their pins conflict), holding only what its config parser
# imports, so the tests can load memplan's exports with each framework's own parser (tests/planner/export/validators).
# Idempotent: a venv whose stamp matches is left alone (0.01 s). `make fwenv` runs it; `make test` uses the venvs.
# usage: tools/fwenv.sh [llamafactory|ms-swift|axolotl|verl|torchtitan|gptqmodel|prequant|video|openrlhf|ray ...]   (default: all)
#   FWENV_ROOT=.fwenv
# verl: what its SFT config code imports (verl/__init__ imports ray and tensordict; hydra composes the YAML; transformers
#   within verl's own pin, >=5.5.3,<5.11). torchtitan: what torchtitan.train's ConfigManager and Trainer.Config import,
#   triton among them (distributed/minimal_async_ep/kernels.py imports it at module level; 0.7 GB, CPU-importable).
# gptqmodel: not a framework, the library that trains GPTQ/AWQ checkpoints (tests/probes/test_gptqmodel.py measures
#   its layers; its setup.py builds no extension, so the sdist installs on a CPU machine). optimum: transformers 5.23's
#   GPTQ loader imports optimum.gptq first (quantizers/quantizer_gptq.py:52-60, MIN_OPTIMUM_VERSION 1.24.0 at :36);
#   2.3.0 needs nothing the venv lacks (tests/probes/gptq_tf5.py loads GPTQ checkpoints with it).
# prequant: not a framework, the stack that loads prequantized compressed-tensors (W4A16) and HQQ checkpoints as
#   ms-swift 3.10 pins it (compressed-tensors 0.12.2, transformers 4.57.1, PEFT 0.17.1, hqq 0.2.8; transformers 5 cannot
#   run either under PEFT): tests/probes/test_prequant.py measures their layers. hqq has only an sdist (pure Python).
# video: transformers' Qwen2-VL video processor, which imports torchvision (tests/planner/model/test_video_rules.py
#   counts its tokens). torchvision cannot sit beside the CPU torch 2.13 wheel; torch 2.14.1 and torchvision 0.29.1
#   (the releases this machine's pip is capped at) install together (a CUDA build: about 5.5 GB, from the local
#   index; half a minute).
# FWENV_SHARED_TORCH=1: torch goes once into $ROOT/_torch and each framework venv sees it through a .pth file
#   (about 25 s and 900 MB less per venv; a framework dep that needs another version of a torch dependency such
#   as fsspec gets it in its own venv, which comes first on sys.path; nothing ever touches the shared one).
# uv installs the frameworks, the same versions pip resolves (pip freeze compared venv by venv), in a fraction of the
#   time: all nine from empty in 2 min 43 s on 2 shared cores, pip 23 min 45 s (2026-12-03). uv reads none of pip's
#   configuration, so uv_src hands it pip's own sources and constraints (pip config list: find-links, index URLs,
#   constraint files: on this machine the CPU torch wheel in
#   /opt/wheels, the local indexes with the video venv's torch 2.14.1 and its CUDA libraries, the torch<=2.14.1 cap),
#   with pip's rule of the best version across all of them (--index-strategy unsafe-best-match); a torch uv resolves is
#   the same file pip takes, never a download (the shared torch in $ROOT/_torch too). pip installs only uv
#   ($ROOT/_uv, pinned). uv writes no .pyc files (pip compiled every module, half its time); python writes those of the
#   modules a test imports, the first time.
set -euo pipefail
ROOT=${FWENV_ROOT:-.fwenv}
PY=${PY:-python3}
TORCH=torch==2.13.0      # the CPU wheel on disk; a framework's deps must never replace it (CUDA torch, 2.5 GB+)
UV_PIN=uv==0.13.9
UV=$ROOT/_uv/bin/uv
UVSRC=()

# framework (installed --no-deps) | the parser's own imports, at the versions the framework pins or resolves to
declare -A PKG=(
  [llamafactory]="llamafactory==0.9.5"
  [ms-swift]="ms-swift==4.6.0"
  [axolotl]="axolotl==0.19.0"
  [gptqmodel]="gptqmodel==7.7.0"
  [verl]="verl==0.9.1"
  [torchtitan]="torchtitan==0.3.0"
  [prequant]="compressed-tensors==0.12.2 hqq==0.2.8.post1"
)
# (LLaMA-Factory's torchdata: its v1 trainer imports it, src/llamafactory/v1/core/utils/batching.py:31-32; tests/probes/
# test_lf_v1_head.py runs that trainer's own loss)
declare -A DEPS=(
  [llamafactory]="transformers==5.6.0 datasets==4.0.0 accelerate==1.11.0 peft==0.18.1 trl==0.24.0 omegaconf==2.4.0 deepspeed==0.19.8 torchdata==0.11.0"
  [ms-swift]="transformers==5.19.0 datasets==4.8.4 accelerate==1.15.0 peft==0.20.0 trl==0.29.1 modelscope==1.40.2 pillow==13.0.0 json_repair==0.64.6 deepspeed==0.19.8"
  [gptqmodel]="transformers==5.23.0 accelerate==1.15.0 pillow==13.0.0 requests==2.34.2 pypcre==0.6.4 logbar==0.4.15 tokenicer==0.0.14 device-smi==0.5.7 defuser==0.0.28 threadpoolctl==3.8.0 optimum==2.3.0"
  [verl]="transformers==5.10.4 hydra-core==1.3.2 omegaconf==2.3.0 tensordict==0.10.0 ray==2.60.0 codetiming==1.4.0 peft==0.21.2 accelerate==1.15.0 datasets==5.2.0 pillow==13.0.0 numpy==2.4.6 packaging==25.0"
  [torchtitan]="tyro==1.0.17 spmd_types==0.2.3 tokenizers==0.23.3 safetensors==0.8.0 einops==0.8.2 torchdata==0.11.0 tensorboard==2.21.0 triton==3.7.1 datasets==4.7.0 numpy==2.4.6"
  [prequant]="transformers==4.57.1 huggingface_hub==0.36.0 tokenizers==0.22.1 peft==0.17.1 accelerate==1.11.0 pydantic==2.12.5 loguru==0.7.3 termcolor==3.3.0 einops==0.8.2 numpy==2.4.6"
  [axolotl]="transformers==5.16.1 huggingface_hub==1.17.0 tokenizers==0.23.1 accelerate==1.13.0 peft==0.20.0 trl==1.9.0 pydantic==2.12.5 PyYAML==6.0.3 pillow==13.0.0 addict==2.4.0 colorama==0.4.6 mistral-common==1.11.5 datasets==4.8.4 evaluate==0.4.1 wandb==0.31.0"
)

SHARED=${FWENV_SHARED_TORCH:-0}

shared_torch() {  # $ROOT/_torch: a venv with torch alone
  local venv=$ROOT/_torch
  if [ "$(cat "$venv/.fwenv-stamp" 2>/dev/null)" = "$TORCH" ]; then return; fi
  rm -rf "$venv"
  $PY -m venv "$venv"
  uv_add "$venv" "$TORCH"
  echo "$TORCH" > "$venv/.fwenv-stamp"
}

uv_src() {  # $ROOT/_uv: uv, from PyPI by pip. UVSRC: pip's sources and constraints as uv options (last setting wins)
  if [ "$(cat "$ROOT/_uv/.fwenv-stamp" 2>/dev/null)" != "$UV_PIN" ]; then
    rm -rf "$ROOT/_uv"
    $PY -m venv "$ROOT/_uv"
    "$ROOT/_uv/bin/python" -m pip install -q --disable-pip-version-check "$UV_PIN"
    echo "$UV_PIN" > "$ROOT/_uv/.fwenv-stamp"
  fi
  [ ${#UVSRC[@]} -gt 0 ] && return
  mapfile -t UVSRC < <($PY -m pip config list 2>/dev/null | $PY -c '
import ast, sys
opt = {}
for line in sys.stdin:
    key, _, val = line.strip().partition("=")
    section, _, name = key.rpartition(".")
    if section in ("global", "install", ":env:") and \
            name in ("index-url", "extra-index-url", "find-links", "constraint"):
        opt[name] = ast.literal_eval(val).split()
for name, flags in (("index-url", ["--index-url"]), ("extra-index-url", ["--extra-index-url"]),
                    ("find-links", ["--find-links"]), ("constraint", ["--constraint", "--build-constraint"])):
    for v in opt.get(name, []):
        for f in flags:
            print(f); print(v)
print("--index-strategy"); print("unsafe-best-match")')
}

# uv_add VENV REQ...: what `pip install REQ...` does in VENV, done by uv. pip keeps every installed version that fits
#   (the venv's own pip and setuptools, the shared torch and its deps seen through the .pth); uv cannot see the .pth
#   side, so the versions the venv's python sees seed the output file of `uv pip compile`, which prefers them; what the
#   resolution then names that the venv does not already see goes in --no-deps. Extra uv options go before a `--`.
uv_add() {
  local venv=$1 opts=(); shift
  if [[ " $* " == *" -- "* ]]; then while [ "$1" != "--" ]; do opts+=("$1"); shift; done; shift; fi
  uv_src
  "$venv/bin/python" -c '
import importlib.metadata as md, re
seen = {}
for d in md.distributions():  # sys.path order: the first of a name is the one imported
    n = re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower()
    seen.setdefault(n, n + "==" + d.version)
print("\n".join(sorted(seen.values())))' > "$venv/fwenv-have.txt"
  cp "$venv/fwenv-have.txt" "$venv/fwenv-lock.txt"
  printf '%s\n' "$@" > "$venv/fwenv-want.txt"
  uvpip compile "$venv" "${opts[@]}" --no-header --no-annotate -o "$venv/fwenv-lock.txt" "$venv/fwenv-want.txt"
  grep -vxFf "$venv/fwenv-have.txt" "$venv/fwenv-lock.txt" > "$venv/fwenv-need.txt" || true
  if [ -s "$venv/fwenv-need.txt" ]; then uvpip install "$venv" --no-deps -r "$venv/fwenv-need.txt"; fi
}

uvpip() {  # uvpip compile|install VENV ARG...: uv pip, for VENV's python, from pip's sources
  local cmd=$1 venv=$2; shift 2
  uv_src
  "$UV" pip "$cmd" -q --python "$venv/bin/python" "${UVSRC[@]}" "$@"
}

setup_one() {
  local name=$1 venv=$ROOT/$1 want
  want="$TORCH shared=$SHARED ${PKG[$1]} ${DEPS[$1]}"
  if [ "$(cat "$venv/.fwenv-stamp" 2>/dev/null)" = "$want" ]; then echo "$name: up to date"; return; fi
  rm -rf "$venv"
  if [ "$SHARED" = 1 ]; then
    # no pip of its own (ensurepip: 8 s of a 26 s build on 2 loaded cores): the venv sees the shared one's pip and
    #   setuptools through the .pth, the versions ensurepip installs here (pip 23.2.1, setuptools 84.2.1)
    $PY -m venv --without-pip "$venv"
    echo "$TORCH" > "$venv/torch-constraint.txt"
    shared_torch
    "$ROOT/_torch/bin/python" -c 'import site; print(site.getsitepackages()[0])' \
      > "$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/_fwenv_shared_torch.pth"
  else
    $PY -m venv "$venv"
    echo "$TORCH" > "$venv/torch-constraint.txt"
    uv_add "$venv" "$TORCH"                       # first, alone: the CPU build (pip's find-links wheel)
  fi
  uvpip install "$venv" --no-deps ${PKG[$1]}                    # the framework(s) without its UI/serving/GPU-kernel deps
  uv_add "$venv" -c "$venv/torch-constraint.txt" -- ${DEPS[$1]}  # one resolver run: every pin holds, CPU torch stays
  # the torch the venv imports (the first on its path) is the CPU one: read from its metadata, not imported (4 s)
  "$venv/bin/python" -c "import importlib.metadata as md; v = md.version('torch'); assert v == '2.13.0+cpu', v"
  echo "$want" > "$venv/.fwenv-stamp"
  echo "$name: installed"
}

# openrlhf: openrlhf.cli.train_ppo_ray imports ray, vllm, deepspeed, transformers and flash_attn at module level, and its
#   parser is built under __main__, so its validator runs the module itself. vllm goes in --no-deps (its deps pull CUDA
#   torch; importing it on CPU works); flash-attn has only an sdist, built without its CUDA extension
#   (FLASH_ATTENTION_SKIP_CUDA_BUILD), and flash_attn/__init__ imports that extension: a one-line empty module stands in
#   (nothing the parser reaches calls it). The rest at openrlhf 0.11.2's own pins. About half a minute, 1.4 GB.
ORL_PKGS="openrlhf==0.11.2 vllm==0.29.0"
ORL_FA="flash-attn==2.8.3"
ORL_DEPS="ray==2.55.0 transformers==5.15.0 deepspeed==0.19.6 pylatexenc==2.11 aiohttp==3.14.5 peft==0.21.2 torchdata==0.11.0 pillow==13.0.0 einops==0.8.2 datasets==4.8.4"

setup_openrlhf() {
  local venv=$ROOT/openrlhf want="$TORCH $ORL_PKGS $ORL_FA $ORL_DEPS"
  if [ "$(cat "$venv/.fwenv-stamp" 2>/dev/null)" = "$want" ]; then echo "openrlhf: up to date"; return; fi
  rm -rf "$venv"
  $PY -m venv "$venv"
  shared_torch
  local sp
  sp=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  "$ROOT/_torch/bin/python" -c 'import site; print(site.getsitepackages()[0])' > "$sp/_fwenv_shared_torch.pth"
  echo "$TORCH" > "$venv/torch-constraint.txt"
  uvpip install "$venv" --no-deps $ORL_PKGS
  uv_add "$venv" -c "$venv/torch-constraint.txt" -- setuptools wheel packaging psutil ninja
  FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE FLASH_ATTENTION_FORCE_BUILD=TRUE uvpip install "$venv" --no-deps --no-build-isolation $ORL_FA
  echo "# memplan: empty stand-in for flash-attn's CUDA extension (imported by flash_attn/__init__, never called here)" \
    > "$sp/flash_attn_2_cuda.py"
  uv_add "$venv" -c "$venv/torch-constraint.txt" -- $ORL_DEPS
  "$venv/bin/python" -c "import torch; assert torch.__version__ == '2.13.0+cpu', torch.__version__"
  echo "$want" > "$venv/.fwenv-stamp"
  echo "openrlhf: installed"
}

# ray: the cluster engine the API's Ray executor submits probe jobs to (api/executors/ray.py), through the Ray Jobs REST
#   API of `ray start --head` (ray[default]: the dashboard serves the Jobs API). No torch: a job's entrypoint is memplan's
#   own python, not this venv's. tests/api/test_ray_executor.py starts the head on loopback from here.
RAY="ray[default]==2.55.0"

setup_ray() {
  local venv=$ROOT/ray
  if [ "$(cat "$venv/.fwenv-stamp" 2>/dev/null)" = "$RAY" ]; then echo "ray: up to date"; return; fi
  rm -rf "$venv"
  $PY -m venv "$venv"
  uv_add "$venv" "$RAY"
  "$venv/bin/python" -c "import ray.dashboard, aiohttp"
  echo "$RAY" > "$venv/.fwenv-stamp"
  echo "ray: installed"
}

VIDEO="torch==2.14.1 torchvision==0.29.1 transformers==5.24.0 numpy==2.4.6 pillow==13.0.0"

setup_video() {
  local venv=$ROOT/video
  if [ "$(cat "$venv/.fwenv-stamp" 2>/dev/null)" = "$VIDEO" ]; then echo "video: up to date"; return; fi
  rm -rf "$venv"
  $PY -m venv "$venv"
  uv_add "$venv" $VIDEO
  "$venv/bin/python" -c "import torchvision, transformers.models.qwen2_vl.video_processing_qwen2_vl"
  echo "$VIDEO" > "$venv/.fwenv-stamp"
  echo "video: installed"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced (tools/fwenv_old.sh sources the functions above)
  for name in "${@:-llamafactory ms-swift axolotl verl torchtitan gptqmodel prequant video openrlhf ray}"; do
    for n in $name; do
      case $n in
        video) setup_video ;;
        openrlhf) setup_openrlhf ;;
        ray) setup_ray ;;
        *) setup_one "$n" ;;
      esac
    done
  done
fi
