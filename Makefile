# Hotspot. `make demo` runs the main job; `make test` runs every test against
# the real local stack (Kafka, ZooKeeper, Redis on 127.0.0.1), starting it first.
SHELL := bash
GO ?= go
STACK := deployments/local/stack.sh
BIN := bin
PKGS := ./...

.PHONY: all build test unit bench demo up down status lint check browser clean soak

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

up:
	@$(STACK) up

down:
	@$(STACK) down

status:
	@$(STACK) status

# Unit and integration tests, race detector on. CI=true makes an integration
# test fail, never skip, when a service is missing.
test: up browser
	$(GO) vet $(PKGS)
	eval "$$($(STACK) env)" && $(GO) test -race -count=1 -timeout 30m $(PKGS)

# Unit tests only: integration tests skip without the stack (not under CI=true).
unit:
	$(GO) test -count=1 -short $(PKGS)

# Debian's Chromium, for the live page's headless test.
browser:
	@command -v chromium >/dev/null || { echo "installing Debian's chromium for the page test"; \
		s=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$s apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

# Not in CI: 30 minutes at 100k events/s against the local stack; resident
# memory, goroutines and open files of hotspotd every 30 s (SOAK_* variables
# in deployments/local/soak.sh shorten or change it).
soak: up
	deployments/local/soak.sh

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
