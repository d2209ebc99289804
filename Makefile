# Everything a fresh clone needs beyond Python 3.11, Java 17 and Maven is installed here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFORMANCE ?= ../shared/conformance
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON ?= $(abspath $(BIN)/python)

.PHONY: setup venv kafka class-archives browser test unit spark integration imports conformance demo bench clean test-chart image test-docker \
        soak-tests test-harness test-network test-security test-zookeeper test-capacity s3a test-spark-cluster chart-acls docs test-docs

setup: venv kafka class-archives
venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[spark,test,docs]'
	touch $@

# The Kafka broker's classpath, resolved by Maven from pom.xml, and its command-line tools' from
# pom-tools.xml (a version behind, see there); the jars stay in ~/.m2.
kafka: build/kafka.classpath build/kafka-tools.classpath build/kafka-zookeeper.classpath build/kafka-3.2.classpath \
       build/spark-kafka.classpath
build/kafka.classpath: pom.xml
	mkdir -p build
	mvn -q -B dependency:build-classpath -Dmdep.outputFile=$@
build/kafka-tools.classpath: pom-tools.xml
	mkdir -p build
	mvn -q -B -f pom-tools.xml dependency:build-classpath -Dmdep.outputFile=$@
# Spark's Kafka connector for the aggregator (pom-spark-kafka.xml): handed to its session as spark.jars.
build/spark-kafka.classpath: pom-spark-kafka.xml
	mkdir -p build
	mvn -q -B -f pom-spark-kafka.xml dependency:build-classpath -Dmdep.outputFile=$@
# ZooKeeper-era brokers (pom-zookeeper.xml): Kafka 3.9 with its ZooKeeper server, and 3.2 (before KIP-827).
build/kafka-zookeeper.classpath: pom-zookeeper.xml
	mkdir -p build
	mvn -q -B -f pom-zookeeper.xml dependency:build-classpath -Dmdep.outputFile=$@
build/kafka-3.2.classpath: pom-zookeeper.xml
	mkdir -p build
	mvn -q -B -f pom-zookeeper.xml -Dkafka.version=3.2.3 dependency:build-classpath -Dmdep.outputFile=$@
# The classes each lab JVM loads (brokers, tools, Spark's driver), recorded once as class-data archives that later
# starts map instead of loading them again (tests/harness/class_archives.py); ~1 min.
RECORD_CLASSES := PYTHONPATH=tests $(BIN)/python -m harness.record_class_archives
class-archives: $(addprefix build/class-archives/,kafka.jsa kafka-tools.jsa kafka-zookeeper.jsa kafka-3.2.jsa spark.jsa)
build/class-archives/%.jsa: build/%.classpath tests/harness/record_class_archives.py | $(VENV)/.installed
	$(RECORD_CLASSES) $*
build/class-archives/kafka-tools.jsa: build/kafka.classpath
build/class-archives/spark.jsa: $(VENV)/.installed tests/harness/record_class_archives.py
	$(RECORD_CLASSES) spark
# Hadoop's S3A connector for a history on object storage (pom-s3a.xml; ~640 MB, so not in make setup).
s3a: build/s3a.classpath
build/s3a.classpath: pom-s3a.xml
	mkdir -p build
	mvn -q -B -f pom-s3a.xml dependency:build-classpath -Dmdep.outputFile=$@
# MinIO, the S3-compatible server the capacity tests keep a history on: built from its Go module (~1–3 min once).
MINIO_VERSION ?= v0.0.0-20260212201848-7aac2a2c5b7c
MINIO := build/tools/bin/minio
$(MINIO):
	GOBIN=$(abspath build/tools/bin) go install github.com/minio/minio@$(MINIO_VERSION)

# Everything CI runs: the import contract, unit, Spark and integration tests, the conformance cases.
# Every conformance folder runs inside it, through a running aggregator (tests/integration/test_aggregator.py);
# `make conformance` runs them through evaluate on Spark Connect, `make test-harness` the lab's own tests.
test: setup imports browser
	CONFORMANCE=$(abspath $(CONFORMANCE)) $(BIN)/pytest --ignore=tests/chart --ignore=tests/docker --ignore=tests/docs -m "not harness and not security and not zookeeper and not capacity and not network_lab and not spark_cluster"

# The network lab (tests/integration/test_network_throttle.py): brokers behind 6 MB/s links, a move throttled by the
# sidecars against one at kafka-reassign-partitions' static rate, ~4 min; CI runs it after make test (make test has
# the fault soak instead, which takes as long).
test-network: setup
	$(BIN)/pytest -m network_lab tests/integration

test-harness: setup
	$(BIN)/pytest -m harness tests/integration

# The version matrix's ZooKeeper-mode generations (Kafka 3.9 and 3.2 with a real ZooKeeper), ~9 min; CI runs it
# after make test.
test-zookeeper: setup
	$(BIN)/pytest -m zookeeper tests/integration

# The history and the capacity report end to end: an agent and the aggregator on a real cluster whose disk fills in
# retention's sawtooth, the history appended, `quota-sidecar report -o json`; then the history on a MinIO server
# through S3A (~5 min); CI runs it after make test.
test-capacity: setup s3a $(MINIO)
	$(BIN)/pytest -m capacity tests/integration

# The aggregator on a Spark standalone cluster (Spark's own Master and two Workers from the installed pyspark): it
# decides for a 3-broker cluster's agents on the Workers' executors, killed and started again from its checkpoint;
# beside it the report, both over a history on a MinIO server through S3A (~6 min); CI runs it after make test.
test-spark-cluster: setup s3a $(MINIO)
	$(BIN)/pytest -m spark_cluster tests/integration

# Under Kafka's authorizer over SASL_SSL and mutual TLS: each of the agent's ACLs taken away in turn, and the TLS
# failures (a wrong CA, a host name mismatch, an expired client certificate). ~3 min; make test runs the
# least-privilege test with every ACL granted.
test-security: setup
	$(BIN)/pytest -m security tests/integration

# Headless Chromium for the capacity report's test (tests/spark/test_report.py): Debian's package, as root.
browser:
	@command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

# Seconds: pure decisions, configuration, the loop, status, metrics and HTTP without a cluster; the CLI's exit
# codes start `aggregate` against an unanswering pipeline, whose Spark needs the Kafka connector's jars (setup).
unit: setup imports
	$(BIN)/pytest tests/unit

# The Spark rules in one embedded session, and the same through a local Spark Connect server; the capacity
# report's page opened in headless Chromium.
spark: venv browser
	$(BIN)/pytest tests/spark

# Real Kafka clusters (and, as root, brokers in network namespaces), real sidecar processes.
integration: setup
	$(BIN)/pytest tests/integration

# The integration tests that assert a rate, a size at a moment or a latency (tests/soak_timed.py lists them),
# RUNS times beside LOAD busy processes: each must pass every run. ~20 min a run on 2 cores.
RUNS ?= 5
LOAD ?= 2
soak-tests: setup
	$(BIN)/python tests/soak_timed.py --runs $(RUNS) --load $(LOAD) $(if $(K),-k '$(K)')

# The one-way house: fails on an import that goes up a layer, or a circle (setup.cfg [importlinter]).
imports: venv
	$(BIN)/lint-imports

# Every cases* folder there: each is a set of snapshots with the decisions they must produce. Each case is one
# `quota-sidecar evaluate`, all deciding on one local Spark Connect server (tests/conformance.py): ~1.3 min.
conformance: setup
	$(BIN)/python tests/conformance.py $(CONFORMANCE)

# The Helm chart (charts/quota-sidecar): helm lint, every values combination rendered and validated
# (kubernetes-validate --strict), the alerts through promtool, the rendered container run against a local
# cluster, a real Prometheus firing the alerts on a sidecar, and helm install --wait into a real control plane
# (tests/chart/kube/build.sh: kube-apiserver & co from Go modules, once, ~10 min; KUBE=0 skips it). helm comes
# from the Go module proxy into build/tools (once, ~2 min), promtool and prometheus from Debian's prometheus
# package (as root); without them the tests skip and say why.
HELM_VERSION ?= v3.22.0
HELM := build/tools/bin/helm
# The Kubernetes version helm assumes offline (helm template), set as helm's own release build sets it (its Makefile's
# LDFLAGS, from its client-go): without it helm says 1.20, which the chart (kubeVersion >= 1.28) refuses.
HELM_KUBE_MINOR ?= 37
HELM_LDFLAGS := $(foreach pkg,chartutil lint/rules,-X helm.sh/helm/v3/pkg/$(pkg).k8sVersionMajor=1 \
                -X helm.sh/helm/v3/pkg/$(pkg).k8sVersionMinor=$(HELM_KUBE_MINOR))
$(HELM):
	@if command -v go >/dev/null; then echo "installing helm $(HELM_VERSION) into build/tools"; \
	 GOBIN=$(abspath build/tools/bin) go install -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); fi
# The ACL table of the chart's NOTES: what the agent needs with the chart's default ConfigMap, which names the data
# volume's log dirs but no broker id (the pod's ordinal or the broker's server.properties give it), as an operator
# would print it (a unit test checks it is what `quota-sidecar acls` prints today).
CHART_ACLS := --principal User:quota-sidecar -o table --set kafka.admin.bootstrap.servers=localhost:9092 \
              --set storage.per.volume.limit.min.available.bytes=5368709120 \
              --set storage.local.log.dirs=/var/lib/kafka/data
chart-acls: venv
	$(BIN)/quota-sidecar acls $(CHART_ACLS) > charts/quota-sidecar/files/acls.md
test-chart: setup $(HELM)
	@if ! command -v promtool >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	 DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus >/dev/null; fi
	@if command -v go >/dev/null && [ "$(KUBE)" != 0 ]; then tests/chart/kube/build.sh build/tools/kube; fi
	HELM=$(abspath $(HELM)) $(BIN)/pytest tests/chart

# The images of deploy/Containerfile (quota-sidecar: the agent; quota-sidecar-spark: the aggregator;
# quota-sidecar-kafka) with the Docker engine of DOCKER_HOST, or one of the project's own (deploy/docker-engine.sh:
# no bridge, no iptables rules), on a debootstrap base when no registry answers. As root it installs Debian's
# docker.io and debootstrap first when missing (deploy/install-tools.sh). ~5 min on 2 shared cores, ~2.5 GB in
# build/docker.
image: setup
	PYTHON=$(abspath $(BIN)/python) deploy/build-images.sh

# The images against real Kafka: the agent decided for by the aggregator, both locked down
# (tests/docker/test_images.py), pytest-docker's compose end to end (broker, agent, aggregator): flood -> throttle
# -> lift (tests/docker/test_compose.py), and the chart's example pod: the broker's start script and the agent
# beside it, as rendered by helm, and the uninstall's hook Job while the agent runs
# (tests/docker/test_example_pod.py). As root it installs Debian's docker.io and docker-compose when missing, brings
# up the project's own engine (no bridge, no iptables rules, ip_forward untouched), builds the images if missing and
# stops the engine after, then checks that the host's FORWARD chain and bridges are as they were. Without an engine
# it fails in one line (skips would prove nothing).
test-docker: setup $(HELM)
	PYTHON=$(abspath $(BIN)/python) deploy/test-docker.sh

# The documentation site (mkdocs.yml) into build/site: docs/, with the configuration, CLI and ACL pages generated
# from the code at build time (docs/gen_pages.py, mkdocs-click); --strict fails on a broken link. Seconds.
docs: venv
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict --site-dir build/site

# The site (make docs), then tests/docs: the README's Kubernetes quick start as a newcomer copies it (its `helm
# template`, helm installed as make test-chart does, ~2 min once) and the site's command-line page. CI runs it after
# make test.
test-docs: venv $(HELM) docs
	HELM=$(abspath $(HELM)) $(BIN)/pytest tests/docs

demo: setup
	$(BIN)/python examples/demo.py

bench: setup
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf build $(VENV) *.egg-info .pytest_cache
