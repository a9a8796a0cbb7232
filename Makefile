# Hotspot. `make demo` runs the main job; `make test` runs every test against
# the real local stack (Kafka, ZooKeeper, Redis on 127.0.0.1), starting it first.
SHELL := bash
GO ?= go
STACK := deployments/local/stack.sh
BIN := bin
PKGS := ./...

.PHONY: all build test test-cluster test-redis unit bench demo demo-proxy up down status lint check browser tools image clean soak

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# SECURE=1: the secured stack (TLS, SASL, ZooKeeper and Redis auth) instead;
# CLUSTER=1: the clustered one (3 Kafka brokers, replication factor 3, a
# 3-server ZooKeeper ensemble).
SECURE_FLAG := $(if $(SECURE),--secure,$(if $(CLUSTER),--cluster))

up:
	@$(STACK) up $(SECURE_FLAG)

down:
	@$(STACK) down $(SECURE_FLAG)

status:
	@$(STACK) status $(SECURE_FLAG)

# Unit and integration tests, race detector on. CI=true makes an integration
# test fail, never skip, when a service is missing.
# The secured stack runs beside the plain one for the trust-boundary test.
test: up browser tools
	@$(STACK) up --secure
	$(GO) vet $(PKGS)
	eval "$$($(STACK) env)" && $(GO) test -race -count=1 -timeout 30m $(PKGS)
	eval "$$($(STACK) env --secure)" && $(GO) test -race -count=1 -timeout 10m -run 'TestSecure' ./cmd/hotspotd
	$(MAKE) --no-print-directory test-cluster
	$(MAKE) --no-print-directory test-redis

# The fault tests on the clustered stack (3 brokers, a 3-server ZooKeeper
# ensemble), started for them and stopped after: about 5 minutes.
test-cluster:
	@$(STACK) up --cluster
	eval "$$($(STACK) env --cluster)" && $(GO) test -race -count=1 -timeout 15m -run 'TestCluster' -v ./cmd/hotspotd; \
		rc=$$?; $(STACK) down --cluster; exit $$rc

# The Redis Cluster and Sentinel tests, on a Redis Cluster (3 masters, 3
# replicas) and a primary, a replica and 3 sentinels (deployments/local/redis.sh),
# started for them beside the plain stack (they also use its ZooKeeper and
# Kafka) and stopped after. Each setup is up in about 3 s.
test-redis: up
	@$(STACK) up --redis-cluster
	@$(STACK) up --redis-sentinel
	eval "$$($(STACK) env)" && eval "$$($(STACK) env --redis-cluster)" && eval "$$($(STACK) env --redis-sentinel)" && \
		$(GO) test -race -count=1 -p 1 -timeout 15m -run 'TestRedisCluster|TestRedisSentinel' -v ./hotcache ./proxy ./cmd/... ./deployments/local; \
		rc=$$?; $(STACK) down --redis-cluster; $(STACK) down --redis-sentinel; exit $$rc

# Unit tests only: integration tests skip without the stack (not under CI=true).
unit:
	$(GO) test -count=1 -short $(PKGS)

# Debian's Chromium, for the live page's headless test.
browser:
	@command -v chromium >/dev/null || { echo "installing Debian's chromium for the page test"; \
		s=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$s apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Debian's Prometheus (promtool; the dashboard test runs a real server) and
# buildah (make image, and the image test), for deployments/; zsh for the
# completion test; nginx, rsyslog, rsyslog-kafka (omkafka) and kcat for the
# log shipper test (deployments/local/shipper.sh). nginx and rsyslogd are in
# /usr/sbin, which a user's PATH may lack.
tools:
	@PATH=$$PATH:/usr/sbin:/sbin; command -v promtool >/dev/null && command -v buildah >/dev/null && command -v zsh >/dev/null && \
		command -v nginx >/dev/null && command -v rsyslogd >/dev/null && command -v kcat >/dev/null && \
		ls /usr/lib/*/rsyslog/omkafka.so >/dev/null 2>&1 || { \
		echo "installing Debian's prometheus, buildah, zsh, nginx, rsyslog, rsyslog-kafka and kcat for the deployment, completion and shipper tests"; \
		s=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$s apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -qq --no-install-recommends prometheus buildah zsh \
			nginx rsyslog rsyslog-kafka kcat >/dev/null; }

# The container images of hotspotd (Containerfile) and of the sidecar proxy
# (Containerfile.proxy): static binaries built here, copied onto scratch, so
# nothing is pulled. Podman if installed, else buildah; IMAGE_BUILD overrides
# the command (e.g. to add --storage-driver vfs).
IMAGE ?= localhost/hotspotd:dev
PROXY_IMAGE ?= localhost/hotspot-proxy:dev
IMAGE_BUILD ?= $(shell command -v podman >/dev/null && echo podman build || echo buildah build)

image:
	@command -v podman >/dev/null || command -v buildah >/dev/null || $(MAKE) --no-print-directory tools
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/image/hotspotd ./cmd/hotspotd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/image-proxy/hotspot-proxy ./cmd/hotspot-proxy
	$(IMAGE_BUILD) -f Containerfile -t $(IMAGE) $(BIN)/image
	$(IMAGE_BUILD) -f Containerfile.proxy -t $(PROXY_IMAGE) $(BIN)/image-proxy

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

# Not in CI: 30 minutes at 100k events/s against the local stack; resident
# memory, goroutines and open files of hotspotd every 30 s (SOAK_* variables
# in deployments/local/soak.sh shorten or change it).
soak: up
	deployments/local/soak.sh

demo-proxy: up
	deployments/local/proxy-demo.sh

demo: up build
	@eval "$$($(STACK) env)" && $(BIN)/hotspot demo --brokers $$HOTSPOT_KAFKA --zk $$HOTSPOT_ZK --redis $$HOTSPOT_REDIS

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt would change:"; echo "$$fmt"; exit 1; fi
	$(GO) vet $(PKGS)
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS); \
	else echo "staticcheck unavailable; skipped"; fi

check: lint test

clean:
	rm -rf $(BIN)
