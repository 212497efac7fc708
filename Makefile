# The README's two commands: `go run ./cmd/sluice` runs sluice; `make test`
# runs every test, installing what is missing first.
GO ?= go
REDIS_PORTS := 7000 7001 7002 7003 7004 7005
CLUSTER_DIR := .cluster

# Tests that need a real Redis Cluster fail instead of skipping.
export SLUICE_REQUIRE_REDIS := 1

.PHONY: test deps vet fmt-check lint cluster cluster-stop fuzz cross bench bench-hot soak

# deps installs what the tests use when it is missing (TestCompat and
# TestRedisBenchmarkSuite fail without it under make test). The Node
# clients are installed again whenever the lock file is newer than what
# npm last installed (its hidden lock file in node_modules), so that a
# pull that moves a client's version does not leave the suite on the old
# one.
deps:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && \
		command -v redis-benchmark >/dev/null 2>&1 || { \
		echo "installing redis-server and redis-tools"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools; }
	@command -v node >/dev/null 2>&1 || { \
		echo "installing nodejs and npm"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; }
	@/usr/bin/python3 -c 'import redis.cluster' >/dev/null 2>&1 || { \
		echo "installing python3-redis"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-redis; }
	@[ proxy/testdata/compat/node_modules/.package-lock.json -nt proxy/testdata/compat/package-lock.json ] || \
		npm ci --no-audit --no-fund --prefix proxy/testdata/compat

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

# -race: vet then reads the packages as make test builds them, so that a
# cold build cache compiles every dependency once, not once for each
# (measured from an empty cache: 444 s of CPU for vet and the test
# binaries, 295 s with -race).
vet:
	$(GO) vet -race ./...

# One package at a time (-p 1): the timing tests (outages, exact
# admission) should not compete with each other for two cores.
test: deps fmt-check vet
	$(GO) test -race -count=1 -p 1 -timeout 9m ./...

# What vet does not see: staticcheck (its checks but the naming and
# comment styles, and ST1005: sluice's error texts are Redis's, word for
# word), and functions only tests call (router/clustertest and
# router/bucket/buckettest are the tests' own helpers). Not in make test:
# it fetches its tools.
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 \
		-checks 'all,-ST1000,-ST1003,-ST1005,-ST1020,-ST1021,-ST1022' ./...
	@out=$$($(GO) run golang.org/x/tools/cmd/deadcode@v0.53.0 ./... 2>&1 | \
		grep -v -e '^router/clustertest/' -e '^router/bucket/buckettest/'); \
		if [ -n "$$out" ]; then echo "$$out"; exit 1; fi

# The binary on the systems without event loops (the goroutine path):
# not in make test, whose minutes it would cost on a cold cache.
cross:
	GOOS=darwin $(GO) build -o /dev/null ./cmd/sluice
	GOOS=windows $(GO) build -o /dev/null ./cmd/sluice

# Short fuzzing runs of every fuzz target (.ci/fuzz finds them); the
# corpora live in testdata/.
fuzz:
	GO=$(GO) ./.ci/fuzz

# A local 6-node cluster (3 primaries, 3 replicas) on ports 7000-7005.
cluster: deps
	@mkdir -p $(CLUSTER_DIR)
	@for p in $(REDIS_PORTS); do \
		redis-server --port $$p --bind 127.0.0.1 --daemonize yes --dir $(CURDIR)/$(CLUSTER_DIR) \
			--cluster-enabled yes --cluster-config-file nodes-$$p.conf --cluster-node-timeout 2000 \
			--save '' --appendonly no --logfile redis-$$p.log --pidfile $(CURDIR)/$(CLUSTER_DIR)/redis-$$p.pid; \
	done
	@for p in $(REDIS_PORTS); do until redis-cli -p $$p ping >/dev/null 2>&1; do sleep 0.1; done; done
	@redis-cli -p 7000 cluster info | grep -q 'cluster_state:ok' || \
		redis-cli --cluster create $(foreach p,$(REDIS_PORTS),127.0.0.1:$(p)) --cluster-replicas 1 --cluster-yes
	@until redis-cli -p 7000 cluster info | grep -q 'cluster_state:ok'; do sleep 0.2; done
	@echo "cluster up: go run ./cmd/sluice --cluster 127.0.0.1:7000"

cluster-stop:
	@for p in $(REDIS_PORTS); do redis-cli -p $$p shutdown nosave >/dev/null 2>&1 || true; done
	@rm -rf $(CLUSTER_DIR)

# The standard comparison set: sluice against the direct EVALSHA path on
# the local cluster, all sharing this machine's cores (about 2.5 minutes).
# Two generators: the Go tool (-suite, which also measures open-loop
# latency, accuracy and memory), then redis-benchmark (-neutral, about
# 90 s), a C client whose own cost does not hide sluice's; it is given
# sluice's pid to read sluice's CPU.
# The same sluice also serves TLS on BENCH_TLS_ADDR, with certificates
# made for the run (bench -certs), for -neutral's TLS rows.
BENCH_ADDR := 127.0.0.1:6399
BENCH_TLS_ADDR := 127.0.0.1:6398
BENCH_TLS := $(CLUSTER_DIR)/tls
bench: cluster
	$(GO) build -o $(CLUSTER_DIR)/sluice ./cmd/sluice
	$(GO) build -o $(CLUSTER_DIR)/bench ./bench
	@$(CLUSTER_DIR)/bench -certs $(BENCH_TLS) >/dev/null
	@$(CLUSTER_DIR)/sluice --listen $(BENCH_ADDR) --cluster 127.0.0.1:7000 --log-level warn --maxclients 11000 \
		--tls-listen $(BENCH_TLS_ADDR) --tls-cert-file $(BENCH_TLS)/node.crt --tls-key-file $(BENCH_TLS)/node.key \
		--tls-ca-cert-file $(BENCH_TLS)/ca.crt & pid=$$!; \
		until redis-cli -p $(lastword $(subst :, ,$(BENCH_ADDR))) info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$$pid"; do \
			kill -0 $$pid 2>/dev/null || exit 1; sleep 0.1; done; \
		$(CLUSTER_DIR)/bench -suite -addr $(BENCH_ADDR) -cluster 127.0.0.1:7000 -duration 2s -rounds 3; rc=$$?; \
		echo; \
		$(CLUSTER_DIR)/bench -neutral -addr $(BENCH_ADDR) -cluster 127.0.0.1:7000 -sluice-pid $$pid -duration 4s \
			-tls-addr $(BENCH_TLS_ADDR) -tls-dir $(BENCH_TLS) || rc=$$?; \
		kill $$pid; exit $$rc

# Soak, not in make test: a steady mixed load through one sluice for
# SOAK_DURATION with the primary on 7000 killed midway; prints and checks
# that sluice's RSS, descriptors and goroutines stay flat and that the
# outage's fallback buckets are released. The killed node is not
# restarted: the cluster is stopped at the end.
SOAK_DURATION ?= 2m
soak: cluster
	$(GO) build -o $(CLUSTER_DIR)/sluice ./cmd/sluice
	$(GO) build -o $(CLUSTER_DIR)/bench ./bench
	@$(CLUSTER_DIR)/sluice --listen $(BENCH_ADDR) --cluster 127.0.0.1:7000 --log-level warn & pid=$$!; \
		until redis-cli -p $(lastword $(subst :, ,$(BENCH_ADDR))) info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$$pid"; do \
			kill -0 $$pid 2>/dev/null || exit 1; sleep 0.1; done; \
		$(CLUSTER_DIR)/bench -soak -addr $(BENCH_ADDR) -sluice-pid $$pid -kill 127.0.0.1:7000 \
			-clients 20 -keys uniform:100000 -duration $(SOAK_DURATION); rc=$$?; \
		kill $$pid; $(MAKE) cluster-stop; exit $$rc

# The hot-key set: one key hammered through three sluice instances that
# split hot keys and one that never does (--hot-threshold 0), against the
# direct EVALSHA path (about a minute).
HOT_PORTS := 6391 6392 6393
bench-hot: cluster
	$(GO) build -o $(CLUSTER_DIR)/sluice ./cmd/sluice
	$(GO) build -o $(CLUSTER_DIR)/bench ./bench
	@pids=""; \
		for p in $(HOT_PORTS); do \
			$(CLUSTER_DIR)/sluice --listen 127.0.0.1:$$p --cluster 127.0.0.1:7000 --log-level warn & pids="$$pids $$!"; \
		done; \
		$(CLUSTER_DIR)/sluice --listen 127.0.0.1:6394 --cluster 127.0.0.1:7000 --log-level warn --hot-threshold 0 & pids="$$pids $$!"; \
		for p in $(HOT_PORTS) 6394; do until redis-cli -p $$p ping >/dev/null 2>&1; do sleep 0.1; done; done; \
		$(CLUSTER_DIR)/bench -hotsuite -addr 127.0.0.1:6391,127.0.0.1:6392,127.0.0.1:6393 -unsplit-addr 127.0.0.1:6394 \
			-cluster 127.0.0.1:7000 -duration 2s -rounds 3; rc=$$?; \
		kill $$pids; exit $$rc
