# corekube — the two commands a fresh clone needs are `make run` and `make test`.
GO       ?= go
BIN      := bin/corekube
DATA_DIR ?= ./data
PKGS     := ./...

.PHONY: all build run test test-short vet fmt-check bench bench-scale clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/corekube

## run: build and start everything on an embedded etcd in $(DATA_DIR)
run: build
	./$(BIN) up --data-dir $(DATA_DIR)

## test: formatting, vet, and every test (race detector on), including the
## end-to-end tests against a real corekube process and the real kubectl
test: fmt-check vet build
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## test-short: the quick subset
test-short:
	$(GO) test -short -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## bench: the benchmarks recorded in BENCHMARKS.md
bench:
	$(GO) test -run '^$$' -bench 'PodCreate' -benchtime 20000x -count 5 -benchmem ./test/bench/
	$(GO) test -run '^$$' -bench 'PodList|ListCacheVsEtcd' -benchtime 20x -benchmem ./test/bench/
	$(GO) test -run '^$$' -bench 'Startup' -benchtime 7x ./test/bench/
	$(GO) test -run '^$$' -bench 'Watchers' -benchtime 1x -count 5 ./test/bench/

## bench-scale: one agent process with $(NODES) nodes and $(PODS) pods beside
## the API server (separate processes of bin/corekube); CPU and memory of
## each at steady state. Minutes at full size: run it on a quiet machine.
NODES  ?= 1000
PODS   ?= 30000
SETTLE ?= 30s
WINDOW ?= 60s
bench-scale: build
	COREKUBE_BENCH_BIN=$(abspath $(BIN)) COREKUBE_BENCH_SCALE_NODES=$(NODES) COREKUBE_BENCH_SCALE_PODS=$(PODS) \
	COREKUBE_BENCH_SCALE_SETTLE=$(SETTLE) COREKUBE_BENCH_SCALE_WINDOW=$(WINDOW) \
		$(GO) test -run '^$$' -bench 'ScaleSteadyState' -benchtime 1x -timeout 60m ./test/bench/

clean:
	rm -rf bin
