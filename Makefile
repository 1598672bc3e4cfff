# memplan: `make run` installs the planner alone (no torch) and prints a plan; `make test` sets up everything
# (CPU torch first) and runs the suite.
PY ?= python3
# Bytecode written as Python writes it by default: with PYTHONDONTWRITEBYTECODE set in the caller's environment every
# process the tests start (the CLI, servers, torchrun ranks, the framework venvs, which uv installs uncompiled) would
# compile each module it imports from source again (0.1 s a process for the planner alone).
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
# the planner installed (editable) from this pyproject.toml; gone with the venv
INSTALLED := $(VENV)/.memplan-installed
# pip install -e, without setuptools' "Editable installation." notice (information about any editable flat layout)
# every install under constraints.txt: the versions the tests measure (a later PEFT, Hub client or TRL must not change
# what CI measures; 2026-12-07: PEFT 0.22.0's LoRA on MoE layers failed three counts pinned to 0.21.2)
EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q -c constraints.txt -e

.PHONY: run test setup setup-dev bench clean docs

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, and only where none is importable: a bare `torch` requirement would pull the CUDA build.
.PHONY: torch
torch: $(BIN)/python
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "torch==$(TORCH_VERSION)"

# the planner alone (pydantic, rich, nvidia-ml-py, platformdirs, pyyaml, huggingface_hub): again only when pyproject.toml changes
$(INSTALLED): pyproject.toml constraints.txt | $(BIN)/python
	$(EDITABLE) .
	@touch $@

setup: $(BIN)/python torch $(INSTALLED)

setup-dev: setup
	$(EDITABLE) ".[dev]"

run: $(INSTALLED)
	$(BIN)/planner suggest --model llama-3.1-8b --gpu a100-80gb --gpus-per-node 8 --global-batch 256 --seq-len 4096 --top 5

# One venv per framework whose own parser loads memplan's exports (tools/fwenv.sh; about 3 minutes the first time,
# nothing after): LLaMA-Factory, ms-swift and axolotl pin conflicting versions of transformers and TRL; gptqmodel's
# GPTQ/AWQ layers are measured in a fourth (tests/probes/test_gptqmodel.py); a fifth holds torchvision for transformers'
# video processor (tests/planner/model/test_video_rules.py); a sixth the compressed-tensors 0.12.2 / hqq 0.2.8 stack on
# transformers 4.57.1 whose layers tests/probes/test_prequant.py measures (7 s from an empty uv cache); verl 0.9.1 and torchtitan 0.3.0 (with triton, which its
# import needs) load the verl and torchtitan exports (tests/planner/export/test_parallel_exports.py).
FWENV := $(CURDIR)/.fwenv
FRAMEWORK_PYTHONS := MEMPLAN_LLAMAFACTORY_PYTHON=$(FWENV)/llamafactory/bin/python \
	MEMPLAN_SWIFT_PYTHON=$(FWENV)/ms-swift/bin/python MEMPLAN_AXOLOTL_PYTHON=$(FWENV)/axolotl/bin/python \
	MEMPLAN_GPTQMODEL_PYTHON=$(FWENV)/gptqmodel/bin/python MEMPLAN_VIDEO_PYTHON=$(FWENV)/video/bin/python \
	MEMPLAN_PREQUANT_PYTHON=$(FWENV)/prequant/bin/python \
	MEMPLAN_VERL_PYTHON=$(FWENV)/verl/bin/python MEMPLAN_TORCHTITAN_PYTHON=$(FWENV)/torchtitan/bin/python \
	MEMPLAN_OPENRLHF_PYTHON=$(FWENV)/openrlhf/bin/python MEMPLAN_RAY_BIN=$(FWENV)/ray/bin/ray \
	MEMPLAN_FWENV_OLD=$(CURDIR)/.fwenv-old
.PHONY: fwenv
fwenv:
	FWENV_ROOT=$(FWENV) FWENV_SHARED_TORCH=1 PY=$(PY) bash tools/fwenv.sh

# One venv per older release line memplan writes files for, each line once (tools/fwenv_old.sh ci: 22 venvs beside
# .fwenv's shared torch and uv), so that tests/planner/export/test_old_releases_parse.py runs each line's own parser on
# every commit; the sweep tier's other releases and LLaMA-Factory's 0.7 line: `tools/fwenv_old.sh all`. Nothing after
# the first build.
FWENV_OLD := $(CURDIR)/.fwenv-old
FWENV_OLD_SET ?= ci
.PHONY: fwenv-old
fwenv-old: fwenv
	FWENV_OLD_ROOT=$(FWENV_OLD) FWENV_BASE=$(FWENV) PY=$(PY) bash tools/fwenv_old.sh $(FWENV_OLD_SET)

# Two pytest workers (pytest-xdist), a test file to one worker and in order, the longest files first (tests/conftest.py
# longest_first, not xdist's order by test count): most tests keep one core busy and the machine has two.
# PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# One torch (OpenMP) thread a worker: two workers with torch's default of a thread a core put 4 spinning threads on
# 2 cores, and every in-process CPU step and sim waits on them (2026-12-05, under load: tests/probes/test_sim.py 374 s
# -> 152 s; a bitsandbytes LoRA step of debug-llama 72.4 s -> 4.1 s). The trainer, torchrun and DeepSpeed ranks the
# tests start already ran with 1 (tests/trainer/helpers.py, probes/dist.py).
PYTEST_THREADS := $(if $(filter 0,$(PYTEST_WORKERS)),,OMP_NUM_THREADS=1)
# What CI runs on every commit: every check, with the property tests at 250 requests a kind and 125 fuzz examples an
# API operation (2,000 of each in `make test-all`; 1,000 and 500 until stop 68, for CI's room: CI's run of stop 67 took
# 68 min; 500 and 250 until stop 71: CI's run of stop 70 took 47 min 56 s); the sweep tier (the
# same checks at more shapes, model sizes, chaos rounds and fuzz examples: pytest -m sweep, docs/tests.md) is
# `make test-all`'s.
test: setup-test
	$(PYTEST_THREADS) MEMPLAN_TEST_EXAMPLES=250 MEMPLAN_CHAOS_ROUNDS=3 MEMPLAN_FUZZ_EXAMPLES=125 $(FRAMEWORK_PYTHONS) $(BIN)/python -m pytest $(PYTEST_PARALLEL) \
		-m "not sweep" tests

# What `make test` sets up, two at a time: the planner's venv (pip, one CPU) beside the framework venvs, then the older
# lines (which share .fwenv's torch and uv). From an empty uv cache on this 2-core machine (2026-12-06): one after the
# other 71 s + 115 s + 98 s; CI's set-up took 5 min 16 s with its Debian packages. -Otarget: each one's output whole.
.PHONY: setup-test
setup-test:
	$(MAKE) -j2 -Otarget setup-dev fwenv-old

# Everything at full size: `make test` and the sweep tier, 20 chaos rounds, 2,000 fuzz examples an operation.
.PHONY: test-all
test-all: setup-dev fwenv
	$(MAKE) fwenv-old FWENV_OLD_SET=all
	$(PYTEST_THREADS) $(FRAMEWORK_PYTHONS) $(BIN)/python -m pytest $(PYTEST_PARALLEL) tests

# The edit loop (under 8 minutes on 2 cores): the tests not marked slow (tests/conftest.py SLOW, each 4 s or more)
# nor sweep, 100 hypothesis requests a kind instead of 2,000 and 3 chaos rounds.
.PHONY: test-fast
test-fast: setup-dev
	$(PYTEST_THREADS) MEMPLAN_TEST_EXAMPLES=100 MEMPLAN_CHAOS_ROUNDS=3 $(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slow and not sweep" tests

bench: setup
	$(BIN)/python benchmarks/plan_latency.py --out benchmarks/results/plan_latency.json
	$(BIN)/python benchmarks/cli_latency.py --out benchmarks/results/cli_latency.json

clean:
	rm -rf $(VENV) $(FWENV) $(FWENV_OLD) *.egg-info

# Rewrite the README's pasted outputs from their commands (docs/readme.py; tests/test_readme.py checks them).
docs: setup-dev
	$(BIN)/python docs/readme.py --write
