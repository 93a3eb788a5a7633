# Two commands do all the set-up:  `make demo` (the main job) and `make test`.
# Both create .venv, install the package and make sure a WebGPU adapter exists
# (installing Mesa's software Vulkan driver with apt when wgpu finds none).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# pytest-xdist workers: on lavapipe a test's first build compiles its kernels with LLVM, mostly on
# one thread, so two workers keep both cores busy (Mesa's cache empty, 2 cores, 2026-11-24: the
# whole suite in 8 min 48 s of wall time for 13 min 7 s of CPU time)
PYTEST_WORKERS ?= 2

export XDG_RUNTIME_DIR ?= /tmp

.PHONY: setup gpu demo test bench zoo info clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

gpu: setup
	$(BIN)/python -m webnn_gpu.setup_gpu

demo: gpu
	$(BIN)/python examples/background_blur.py

test: gpu
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

bench: gpu
	$(BIN)/python -m pytest benchmarks --benchmark-enable $(PYTEST_ARGS)

# The model zoo against LiteRT XNNPACK (benchmarks/zoo.py; ZOO_ARGS="--models iris-landmark --no-cold").
zoo: gpu
	$(BIN)/python benchmarks/zoo.py $(ZOO_ARGS)

info: gpu
	$(BIN)/webnn-gpu info

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
