# Everything a fresh clone needs beyond Python 3.11, Java 17 and Maven is installed here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFORMANCE ?= ../shared/conformance
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON ?= $(abspath $(BIN)/python)

.PHONY: setup venv kafka test unit spark integration imports conformance demo bench clean

setup: venv kafka
venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The Kafka broker's classpath, resolved by Maven from pom.xml, and its command-line tools' from
# pom-tools.xml (a version behind, see there); the jars stay in ~/.m2.
kafka: build/kafka.classpath build/kafka-tools.classpath build/kafka-zookeeper.classpath build/kafka-3.2.classpath
build/kafka.classpath: pom.xml
	mkdir -p build
	mvn -q -B dependency:build-classpath -Dmdep.outputFile=$@
build/kafka-tools.classpath: pom-tools.xml
	mkdir -p build
	mvn -q -B -f pom-tools.xml dependency:build-classpath -Dmdep.outputFile=$@
# ZooKeeper-era brokers (pom-zookeeper.xml): Kafka 3.9 with its ZooKeeper server, and 3.2 (before KIP-827).
build/kafka-zookeeper.classpath: pom-zookeeper.xml
	mkdir -p build
	mvn -q -B -f pom-zookeeper.xml dependency:build-classpath -Dmdep.outputFile=$@
build/kafka-3.2.classpath: pom-zookeeper.xml
	mkdir -p build
	mvn -q -B -f pom-zookeeper.xml -Dkafka.version=3.2.3 dependency:build-classpath -Dmdep.outputFile=$@

# Everything CI runs: the import contract, unit, Spark and integration tests, the conformance cases.
test: setup imports
	$(BIN)/pytest
	@if [ -d "$(CONFORMANCE)" ]; then $(MAKE) --no-print-directory conformance; \
	 else echo "conformance cases not found at $(CONFORMANCE): skipped"; fi

# Seconds, no JVM: pure decisions, configuration, the loop, status, metrics and HTTP without a cluster.
unit: venv imports
	$(BIN)/pytest tests/unit

# The Spark rules in one embedded session, and the same through a local Spark Connect server.
spark: venv
	$(BIN)/pytest tests/spark

# Real Kafka clusters (and, as root, brokers in network namespaces), real sidecar processes.
integration: setup
	$(BIN)/pytest tests/integration

# The one-way house: fails on an import that goes up a layer, or a circle (setup.cfg [importlinter]).
imports: venv
	$(BIN)/lint-imports

# Every cases* folder there: each is a set of snapshots with the decisions they must produce.
conformance: setup
	@set -e; for cases in $(CONFORMANCE)/cases*/; do \
	 PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python $(CONFORMANCE)/run.py $${cases%/}; done

demo: setup
	$(BIN)/python examples/demo.py

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf build $(VENV) *.egg-info .pytest_cache
