# corekube — the two commands a fresh clone needs are `make run` and `make test`.
GO       ?= go
BIN      := bin/corekube
DATA_DIR ?= ./data
PKGS     := ./...

.PHONY: all build run test test-deps test-short vet fmt-check bench bench-scale bench-kwok bench-kubemark clean

all: build

# The release build of deploy/Dockerfile (static, reproducible, no symbol
# table; stack traces and pprof keep working). test/e2e and deploy's tests
# build with the same flags, so the three share one compile in the cache.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN) ./cmd/corekube

## run: build and start everything on an embedded etcd in $(DATA_DIR)
run: build
	./$(BIN) up --data-dir $(DATA_DIR)

## test: formatting, vet, and every test (race detector on), including the
## end-to-end tests against a real corekube process, the real kubectl and
## the official clients (test-deps installs those)
test: fmt-check vet build test-deps
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## test-deps: the clients test/e2e drives besides kubectl: the npm packages
## locked in test/e2e/clients/*/package-lock.json (npm ci, redone only when a
## lock file changes), Debian's python3-kubernetes for /usr/bin/python3
## (apt-get only when it cannot import kubernetes) and Debian's haproxy for
## deploy/'s compose load balancer test. Quick when installed. What
## cannot be installed is a warning here (its tests then skip loudly), or an
## error with COREKUBE_REQUIRE_CLIENTS=1 as in CI.
CLIENT_NPM_DIRS := test/e2e/clients/node test/e2e/clients/openapi
SUDO := $(if $(filter 0,$(shell id -u)),,sudo -n)
define client_dep_failed
{ msg="$(1) could not be installed: the tests that need it will not run"; \
  if [ -n "$$COREKUBE_REQUIRE_CLIENTS" ]; then echo "ERROR: $$msg" >&2; exit 1; fi; \
  echo "WARNING: $$msg" >&2; }
endef

test-deps: $(addsuffix /node_modules/.package-lock.json,$(CLIENT_NPM_DIRS))
	@/usr/bin/python3 -c 'import kubernetes' 2>/dev/null || { \
	  echo "installing python3-kubernetes (Debian) for /usr/bin/python3"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get install -y -q python3-kubernetes || \
	    { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q python3-kubernetes; }; \
	} || $(call client_dep_failed,python3-kubernetes)
	@command -v haproxy >/dev/null || { \
	  echo "installing haproxy (Debian) for deploy/'s load balancer test"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get install -y -q haproxy || \
	    { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q haproxy; }; \
	} || $(call client_dep_failed,haproxy)

# npm writes node_modules/.package-lock.json on every install: newer than
# package-lock.json means the tree matches the lock file.
test/e2e/clients/%/node_modules/.package-lock.json: test/e2e/clients/%/package-lock.json
	@cd test/e2e/clients/$* && npm ci --no-audit --no-fund --loglevel=error || \
	  $(call client_dep_failed,the npm packages of test/e2e/clients/$*)

## test-short: the quick subset: no server over etcd, no process, no e2e
## (testserver.SkipShort); the in-memory-store tests run
test-short:
	$(GO) test -short -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## bench: the benchmarks recorded in BENCHMARKS.md
bench: build
	$(GO) test -run '^$$' -bench 'PodCreate' -benchtime 20000x -count 5 -benchmem ./test/bench/
	$(GO) test -run '^$$' -bench 'PodList|ListCacheVsEtcd' -benchtime 20x -benchmem ./test/bench/
	$(GO) test -run '^$$' -bench 'PodPatch' -benchtime 2000x -count 3 ./test/bench/
	$(GO) test -run '^$$' -bench 'Startup' -benchtime 7x ./test/bench/
	$(GO) test -run '^$$' -bench 'Watchers' -benchtime 1x -count 5 ./test/bench/
	$(GO) test -run '^$$' -bench 'NodeWrites' -benchtime 2000x -count 2 ./test/bench/
	COREKUBE_BENCH_BIN=$(abspath $(BIN)) $(GO) test -run '^$$' -bench 'AgentTermination' -benchtime 1x -count 3 ./test/bench/

## bench-scale: $(NODES) nodes on $(AGENTS) agent processes (default one per
## 1,000 nodes) and $(PODS) pods beside the API server, scheduler and
## controllers (separate processes of bin/corekube): ClusterLoader2's SLIs
## (API call latency, pod startup) while creating, at steady state and in a
## churn phase, and each process's CPU and memory. Minutes at full size: run
## it on a quiet machine. Each phase is printed as it ends; the run stops
## itself after $(TIMEOUT), the last minute of it kept to print the phase
## under way (marked partial), each process's RSS and a summary.
NODES  ?= 1000
PODS   ?= 30000
AGENTS ?=
SETTLE ?= 30s
WINDOW ?= 60s
# CHURN: share of the pods replaced (0: no churn), CHURN_RATE a second
# (deleted, and as many created; 50 is kube's own 5,000-node load test's
# pace), or over CHURN_DURATION when that is set
CHURN  ?= 0.1
CHURN_RATE ?= 50
CHURN_DURATION ?=
TIMEOUT ?= 60m
# NODE_IDENTITIES=1: a client certificate (and connection) per node
NODE_IDENTITIES ?=
# AGENT_ARGS: extra flags for every agent process (e.g. --pod-workers 50)
AGENT_ARGS ?=
# APISERVER_ARGS: extra flags for the API server (e.g. --memory-limit 1536Mi)
APISERVER_ARGS ?=
bench-scale: build
	COREKUBE_BENCH_BIN=$(abspath $(BIN)) COREKUBE_BENCH_SCALE_NODES=$(NODES) COREKUBE_BENCH_SCALE_PODS=$(PODS) \
	COREKUBE_BENCH_SCALE_AGENTS=$(AGENTS) COREKUBE_BENCH_SCALE_SETTLE=$(SETTLE) COREKUBE_BENCH_SCALE_WINDOW=$(WINDOW) \
	COREKUBE_BENCH_SCALE_CHURN=$(CHURN) COREKUBE_BENCH_SCALE_CHURN_RATE=$(CHURN_RATE) COREKUBE_BENCH_SCALE_CHURN_DURATION=$(CHURN_DURATION) \
	COREKUBE_BENCH_SCALE_TIMEOUT=$(TIMEOUT) COREKUBE_BENCH_SCALE_NODE_IDENTITIES=$(NODE_IDENTITIES) \
	COREKUBE_BENCH_SCALE_AGENT_ARGS="$(AGENT_ARGS)" COREKUBE_BENCH_SCALE_APISERVER_ARGS="$(APISERVER_ARGS)" \
		$(GO) test -run '^$$' -bench 'ScaleSteadyState' -benchtime 1x -timeout 0 ./test/bench/

## bench-kwok: the same cluster with its $(NODES) nodes simulated by KWOK
## (sigs.k8s.io/kwok, built into bin/ from the module proxy, not a
## dependency of corekube), then by corekube agents (one process per 1,000
## nodes): each simulator's CPU and RSS per node and per pod, and pod
## startup latency. Fails if kwok does not work against corekube (errors in
## its log, nodes never Ready, pods never Running). KWOK_MODES=kwok or agent
## runs one; LATENCY_PODS at LATENCY_QPS are created after the bulk. Each
## simulator's run stops itself after $(TIMEOUT).
KWOK_VERSION ?= v0.7.0
KWOK         := bin/kwok-$(KWOK_VERSION)
KWOK_MODES   ?= kwok,agent
LATENCY_PODS ?= 500
LATENCY_QPS  ?= 25
$(KWOK):
	@mkdir -p bin/.kwok-install
	GOBIN=$(abspath bin/.kwok-install) $(GO) install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)
	mv bin/.kwok-install/kwok $@ && rmdir bin/.kwok-install

bench-kwok: build $(KWOK)
	COREKUBE_BENCH_BIN=$(abspath $(BIN)) COREKUBE_BENCH_KWOK_BIN=$(abspath $(KWOK)) COREKUBE_BENCH_KWOK_MODES=$(KWOK_MODES) \
	COREKUBE_BENCH_KWOK_LATENCY_PODS=$(LATENCY_PODS) COREKUBE_BENCH_KWOK_LATENCY_QPS=$(LATENCY_QPS) \
	COREKUBE_BENCH_SCALE_NODES=$(NODES) COREKUBE_BENCH_SCALE_PODS=$(PODS) \
	COREKUBE_BENCH_SCALE_SETTLE=$(SETTLE) COREKUBE_BENCH_SCALE_WINDOW=$(WINDOW) COREKUBE_BENCH_SCALE_TIMEOUT=$(TIMEOUT) \
		$(GO) test -run '^$$' -bench 'KwokVsAgent' -benchtime 1x -timeout 0 ./test/bench/

## bench-kubemark: the same with its $(NODES) nodes simulated by kubemark's
## hollow kubelets (k8s.io/kubernetes/cmd/kubemark --morph=kubelet, a real
## kubelet over a fake runtime, one process per node; built into bin/ from
## the module proxy by test/bench/kubemark/go.mod, its own module, not a
## dependency of corekube), then by corekube agents: CPU and RSS per node
## and per pod, pod startup latency. The pods request 10m and 64Mi (a
## hollow node has one CPU and 3840Mi). A kubelet needs five APIs corekube
## does not serve (csinodes, services, the kube-root-ca.crt ConfigMap,
## runtimeclasses, csidrivers): the hollow kubelets reach corekube through
## a stand-in in the benchmark's process that answers those and passes the
## rest on. KUBEMARK_MODES=kubemark or agent runs one; LATENCY_PODS,
## LATENCY_QPS and TIMEOUT as bench-kwok. About 80 MiB a hollow node.
## KUBEMARK_VERSION must be the k8s.io/kubernetes of that go.mod.
KUBEMARK_VERSION ?= v1.32.10
KUBEMARK         := bin/kubemark-$(KUBEMARK_VERSION)
KUBEMARK_MODES   ?= kubemark,agent
KUBEMARK_MOD     := test/bench/kubemark
# kube's release build stamps its version: unstamped, nodes report
# kubeletVersion v0.0.0-master+$$Format:%H$$.
KUBEMARK_MAJOR_MINOR = $(subst ., ,$(patsubst v%,%,$(KUBEMARK_VERSION)))
KUBEMARK_LDFLAGS = -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBEMARK_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(KUBEMARK_MAJOR_MINOR)) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(KUBEMARK_MAJOR_MINOR)) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBEMARK_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=$(word 1,$(KUBEMARK_MAJOR_MINOR)) \
	-X k8s.io/client-go/pkg/version.gitMinor=$(word 2,$(KUBEMARK_MAJOR_MINOR))
$(KUBEMARK): $(KUBEMARK_MOD)/go.mod $(KUBEMARK_MOD)/go.sum
	@grep -Eq '^(require)?[[:space:]]+k8s.io/kubernetes $(KUBEMARK_VERSION)( |$$)' $(KUBEMARK_MOD)/go.mod || { \
	  echo "$(KUBEMARK_MOD)/go.mod does not require k8s.io/kubernetes $(KUBEMARK_VERSION): change it there (and its staging replaces)" >&2; exit 1; }
	cd $(KUBEMARK_MOD) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBEMARK_LDFLAGS)" -o $(abspath $@) k8s.io/kubernetes/cmd/kubemark

bench-kubemark: build $(KUBEMARK)
	COREKUBE_BENCH_BIN=$(abspath $(BIN)) COREKUBE_BENCH_KUBEMARK_BIN=$(abspath $(KUBEMARK)) COREKUBE_BENCH_KUBEMARK_MODES=$(KUBEMARK_MODES) \
	COREKUBE_BENCH_KWOK_LATENCY_PODS=$(LATENCY_PODS) COREKUBE_BENCH_KWOK_LATENCY_QPS=$(LATENCY_QPS) \
	COREKUBE_BENCH_SCALE_NODES=$(NODES) COREKUBE_BENCH_SCALE_PODS=$(PODS) \
	COREKUBE_BENCH_SCALE_SETTLE=$(SETTLE) COREKUBE_BENCH_SCALE_WINDOW=$(WINDOW) COREKUBE_BENCH_SCALE_TIMEOUT=$(TIMEOUT) \
		$(GO) test -run '^$$' -bench 'KubemarkVsAgent' -benchtime 1x -timeout 0 ./test/bench/

clean:
	rm -rf bin
