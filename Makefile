# Two entry points, each doing all of its own set-up on a fresh machine:
#   make demo   build a small environment (the demo extra), probe a Parquet file's Bloom filters,
#               and leave the README's example data in demo/
#   make test   build the whole environment (the test extra), then run every test (Spark's included)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp a stage: the package alone (the demo's first result needs no more), the demo extra,
# the test extra. `make demo` then `make test` installs the test extra on top; `make test` then
# `make demo` installs nothing (the test stamp refreshes the others).
CORE_STAMP := $(VENV)/.installed-core
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
SOURCES := pyproject.toml setup.py src/parquet_bloom/_kernels.c src/parquet_bloom/_kernels_probe.c \
	src/parquet_bloom/_kernels_probe.h

.PHONY: demo test lint bench asan java clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Reinstalled when the C kernels change too: the editable install builds them in place.
$(CORE_STAMP): $(SOURCES) | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(DEMO_STAMP): $(CORE_STAMP)
	@echo "installing the demo extra (deltalake, DuckDB: they write the README's data)"
	$(BIN)/pip install --quiet -e '.[demo]'
	touch $@

$(TEST_STAMP): $(SOURCES) | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[demo,test]'
	touch $(CORE_STAMP) $(DEMO_STAMP) $@

# Spark needs a Java runtime (17 or newer). Install one with the OS package manager when we are
# root and it is missing; otherwise say what to install.
java:
	@if java -version >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing a Java runtime for the Spark tests (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null; \
	else \
		echo "The Spark tests need Java 17 or newer: install a JRE (e.g. 'apt-get install default-jre-headless') and rerun 'make test'." >&2; \
		exit 1; \
	fi

# The first result as soon as the package is in; then the demo extra and the README's data.
demo: $(CORE_STAMP)
	$(BIN)/python examples/demo.py
	@$(MAKE) --no-print-directory --silent $(DEMO_STAMP)
	$(BIN)/python examples/readme_data.py demo

test: $(TEST_STAMP) java
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy
	@# Two processes on the two cores: the Spark tests (one JVM, mostly waiting on it) beside the
	@# rest; the Spark run's output is printed after it ends.
	@set -e; log=$$(mktemp); \
	$(BIN)/python -m pytest -q -m spark >"$$log" 2>&1 & spark=$$!; \
	rest=0; $(BIN)/python -m pytest -q -m "not spark" || rest=$$?; \
	sparkrc=0; wait $$spark || sparkrc=$$?; \
	echo "--- the Spark tests (-m spark):"; cat "$$log"; rm -f "$$log"; \
	test $$rest = 0 -a $$sparkrc = 0

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/run.py

# The compiled kernels built with AddressSanitizer, under the tests that reach them: any read or
# write outside a buffer fails the run (Python's objects from malloc too, so that a read past a
# small bytes object is seen). They are built into a copy of the package in a temporary
# directory, first on the path, so the environment's own build is left as it is.
ASAN_TESTS := tests/test_kernels.py tests/test_snappy.py tests/test_plain.py tests/test_pages.py \
	tests/test_sbbf.py tests/prune/test_local_probe.py \
	tests/test_logical.py tests/rewrite tests/io \
	tests/hudi/test_murmur.py tests/hudi/test_filter.py tests/hudi/test_codec.py
asan: $(TEST_STAMP)
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r src/parquet_bloom "$$tmp/"; rm -f "$$tmp"/parquet_bloom/_kernels*.so; \
	include=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])'); \
	suffix=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))'); \
	cc -shared -fPIC -O1 -g -fsanitize=address -fno-omit-frame-pointer -I"$$include" \
		src/parquet_bloom/_kernels.c src/parquet_bloom/_kernels_probe.c \
		-o "$$tmp/parquet_bloom/_kernels$$suffix"; \
	export PYTHONPATH="$$tmp" ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc \
		LD_PRELOAD="$$(cc -print-file-name=libasan.so) $$(cc -print-file-name=libstdc++.so.6)"; \
	$(BIN)/python -c "from parquet_bloom import kernels; \
		assert kernels.compiled.__file__.startswith('$$tmp'), kernels.compiled"; \
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not spark" $(ASAN_TESTS)

clean:
	rm -rf $(VENV) demo .pytest_cache .mypy_cache .ruff_cache .hypothesis
