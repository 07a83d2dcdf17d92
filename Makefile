# The two commands of the README: `make demo` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed-dev
BENCH_STAMP = $(VENV)/.installed-bench
DATA ?= ../shared/data

.PHONY: demo test lint typecheck unit bench bench-speed bench-tau bench-quality bench-stores bench-prepare bench-async bench-retrieval bench-summary bench-cache bench-snapshots bench-snapshot-queries bench-integrations bench-toolcalls-fake bench-memory check-data-copies test-wide clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(BIN)/contextwright demo

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

# Every property test with WIDE times its examples, fresh ones each run, on a scratch copy of
# the tests (their settings name their counts). Slow: about 15 minutes at 8.
WIDE ?= 8
test-wide: $(STAMP)
	rm -rf .wide && cp -r tests .wide
	perl -pi -e 's/max_examples=(\d+)/"max_examples=".($$1*$(WIDE))/ge' $$(grep -rl max_examples .wide)
	$(BIN)/pytest -q -p no:cacheprovider --rootdir . $$(grep -rl "@given" .wide | sort); \
	status=$$?; rm -rf .wide; exit $$status

bench: bench-speed bench-tau bench-quality bench-stores bench-prepare bench-async bench-retrieval bench-summary bench-cache bench-snapshots bench-snapshot-queries bench-integrations bench-memory

bench-speed: $(BENCH_STAMP)
	$(BIN)/python bench/build_speed.py

bench-tau: $(STAMP)
	$(BIN)/python bench/tau_pairs.py --data $(DATA)/tau-bench-airline-dev

bench-quality: $(STAMP)
	$(BIN)/python bench/quality.py --data $(DATA)

bench-stores: $(STAMP)
	$(BIN)/python bench/store_throughput.py

bench-prepare: $(STAMP)
	$(BIN)/python bench/prepare_speed.py

bench-async: $(STAMP)
	$(BIN)/python bench/async_prepare.py

bench-retrieval: $(STAMP)
	$(BIN)/python bench/retrieval_speed.py --data $(DATA)

bench-summary: $(STAMP)
	$(BIN)/python bench/summary_facts.py --data $(DATA)/tau-bench-airline-dev

bench-cache: $(BENCH_STAMP)
	$(BIN)/python bench/cache.py --data $(DATA)

bench-snapshots: $(STAMP)
	$(BIN)/python bench/snapshot_overhead.py

bench-snapshot-queries: $(STAMP)
	$(BIN)/python bench/snapshot_queries.py

bench-toolcalls-fake: $(STAMP)
	$(BIN)/python bench/toolcalls_fake.py --families

bench-memory: $(STAMP)
	$(BIN)/python bench/memory_flat.py

bench-integrations: $(STAMP)
	$(BIN)/python bench/integrations.py --data $(DATA)/tau-bench-airline-dev

check-data-copies:
	$(PYTHON) bench/check_no_dataset_copies.py --data $(DATA)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
