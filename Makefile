# Every target builds its own virtual environment from pyproject.toml: a fresh clone needs only python3.
# The demo gets a core install of its own (.venv-demo): none of the test, dev or Spark extras.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
DEMO_VENV ?= .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: setup test lint typecheck unit demo clean localstack-setup java-peer-setup spark-s3a-setup

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[s3,test,dev,spark]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check aioiceberg tests benchmarks examples
	$(VENV)/bin/ruff format --check aioiceberg tests benchmarks examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy

localstack-setup:
	PYTHON=$(PYTHON) bash localstack/setup-venv.sh

# The Java peer (Apache Iceberg's Spark runtime, in a PySpark it supports): .venv-java and
# the jars, fetched once by Maven and cached in .java-peer/jars.
java-peer-setup:
	PYTHON=$(PYTHON) bash tests/java/setup.sh

# Spark's S3A connector for the project's PySpark (hadoop-aws and the AWS SDK modules it
# uses), fetched once by Maven and cached in .spark-jars; the test sessions put it on spark.jars.
spark-s3a-setup: $(STAMP)
	PY=$(PY) bash tests/spark_s3a/setup.sh

# loadgroup: modules that share one heavy server (the Java peer's JVM) run on one worker.
# TEST_WORKERS: the xdist worker count (`make unit TEST_WORKERS=2`); the suite waits on
# servers and JVMs for about 40% of its wall time, so three workers on two cores.
TEST_WORKERS ?= 3
unit: $(STAMP) localstack-setup java-peer-setup spark-s3a-setup
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup -q

test: lint typecheck unit

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q -e .
	rm -f $(DEMO_VENV)/.installed-*
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/aioiceberg --warehouse ./warehouse demo

clean:
	rm -rf $(VENV) $(DEMO_VENV) .mypy_cache .pytest_cache .ruff_cache
