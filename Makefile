# pylog: `make demo` and `make test` do all the set-up on a fresh Debian machine with Python >= 3.10.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# Debian packages pylog needs at run or test time: a JRE and ZooKeeper for the cluster, javac for the
# Kafka tool runner (below), kcat for interop tests, Maven to fetch Apache Kafka, Chromium and its
# WebDriver for the status page's browser test, Burrow for the lag-evaluation test (issue 19). Each is
# installed only when the command it provides is missing.
APT_PACKAGES := default-jre-headless:java default-jdk-headless:javac zookeeper:/usr/share/zookeeper/bin/zkServer.sh \
  kcat:kcat maven:mvn chromium:chromium chromium-driver:chromedriver burrow:Burrow
PYTEST_ARGS ?=
# The benchmarks' peer (bench/broker_ingest.py): Redis Streams, driven by redis-benchmark.
BENCH_APT_PACKAGES := redis-server:redis-server redis-tools:redis-benchmark

.PHONY: setup system-packages python-packages apache-kafka spark-kafka test test-unit demo bench clean

# Apache Kafka, the reference peer (tests/peer, bench/): its broker, Java client and tools, copied
# from Maven Central once into .cache (ignored by git); later runs find the stamp and skip.
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' conf/apache-kafka/pom.xml)
KAFKA_HOME := .cache/apache-kafka/$(KAFKA_VERSION)
KAFKA_STAMP := $(KAFKA_HOME)/.fetched-$(shell cat conf/apache-kafka/pom.xml | cksum | cut -d' ' -f1)

# KafkaToolRunner runs Kafka's tools one after another in one JVM (broker/tools/kafka_tool_runner.py
# says why); compiled beside the jars, into a new directory renamed into place whole.
KAFKA_RUNNER := $(KAFKA_HOME)/runner/KafkaToolRunner.class

# Spark's own Kafka connector (format("kafka"), spark-sql-kafka-0-10) for the peer tier's Spark tests:
# only the jars pyspark does not ship (conf/spark-kafka/pom.xml says which and why this version).
SPARK_KAFKA_VERSION := $(shell sed -n 's:.*<spark.kafka.version>\(.*\)</spark.kafka.version>.*:\1:p' conf/spark-kafka/pom.xml)
SPARK_KAFKA_HOME := .cache/spark-kafka/$(SPARK_KAFKA_VERSION)
SPARK_KAFKA_STAMP := $(SPARK_KAFKA_HOME)/.fetched-$(shell cat conf/spark-kafka/pom.xml | cksum | cut -d' ' -f1)

setup: system-packages python-packages apache-kafka spark-kafka
	@# Compile the numba record and cleaner kernels once into their on-disk cache (a cold compile
	@# takes 5-20 s; every later process, Spark worker and broker then loads them in about a second).
	@$(PY) -c 'import broker.records.arrow'
	@$(PY) -m broker.log.cleaner.warmup
	@$(PY) -m broker.server.group_coordinator

system-packages:
	@missing=""; \
	for entry in $(APT_PACKAGES); do \
	  pkg=$${entry%%:*}; probe=$${entry#*:}; \
	  if [[ $$probe == /* ]]; then [ -e "$$probe" ] || missing="$$missing $$pkg"; \
	  else command -v "$$probe" >/dev/null 2>&1 || missing="$$missing $$pkg"; fi; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; \
	  else echo "error: need root or sudo to apt-get install$$missing" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

python-packages: $(STAMP)

apache-kafka: $(KAFKA_STAMP) $(KAFKA_RUNNER)

$(KAFKA_STAMP): conf/apache-kafka/pom.xml
	@echo "fetching Apache Kafka $(KAFKA_VERSION) from Maven Central into $(KAFKA_HOME)"
	@rm -rf $(KAFKA_HOME) && mkdir -p $(KAFKA_HOME)
	mvn -q -B -f conf/apache-kafka/pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_HOME)/libs
	@touch $@

$(KAFKA_RUNNER): conf/apache-kafka/KafkaToolRunner.java $(KAFKA_STAMP)
	@rm -rf $(KAFKA_HOME)/runner.new && mkdir -p $(KAFKA_HOME)/runner.new
	javac --release 17 -nowarn -d $(KAFKA_HOME)/runner.new -cp '$(KAFKA_HOME)/libs/*' $<
	@rm -rf $(KAFKA_HOME)/runner && mv $(KAFKA_HOME)/runner.new $(KAFKA_HOME)/runner

spark-kafka: $(SPARK_KAFKA_STAMP)

$(SPARK_KAFKA_STAMP): conf/spark-kafka/pom.xml
	@echo "fetching Spark's Kafka connector $(SPARK_KAFKA_VERSION) from Maven Central into $(SPARK_KAFKA_HOME)"
	@rm -rf $(SPARK_KAFKA_HOME) && mkdir -p $(SPARK_KAFKA_HOME)
	mvn -q -B -f conf/spark-kafka/pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(SPARK_KAFKA_HOME)/jars
	@touch $@

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
	  { echo "error: pylog needs Python >= 3.10 (found $$($(PYTHON) --version))" >&2; exit 1; }
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,test]'
	@rm -f $(VENV)/.installed-*; touch $@

# --durations: the CI log names the slowest tests; tests/conftest.py adds each tier's wall time.
test: setup
	$(PY) -m pytest --durations=25 $(PYTEST_ARGS)

test-unit: python-packages
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

demo: setup
	$(PY) -m spark_log.demo

bench: setup
	@$(MAKE) --no-print-directory system-packages APT_PACKAGES="$(BENCH_APT_PACKAGES)"
	@set -e; for script in bench/[!_]*.py; do echo "== $$script"; $(PY) $$script; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
