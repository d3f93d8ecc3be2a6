# The README's commands. `make` alone lists them; `.ci/run` is what CI runs.

GO ?= go

.DEFAULT_GOAL := help
.PHONY: help build run test soak check check-spec bench bench-self

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## the binaries, in bin/: gateway, lockctl, lockbench, and the example verifygrant
	$(GO) build -o bin/ ./cmd/gateway ./cmd/lockctl ./cmd/lockbench ./examples/go/verifygrant

run: ## start a development gateway: embedded backend, loopback, printed token
	$(GO) run ./cmd/gateway --dev

# tools/lab is a module of its own, which ./... leaves out: test, vet and
# staticcheck (the one go.mod pins) run there too. scripts/test runs both
# halves whatever the other did, and prints progress as it goes.
test: ## the whole suite (tools/lab too), against real redis-servers it starts itself (e2e/clients needs the npm registry once, when node is installed); a few minutes
	@scripts/ensure-tools
	@GO=$(GO) scripts/test

# make test runs every randomized fault test too, at a size a busy 2-core
# machine runs in minutes; LOCKGATE_SOAK=1 makes them long.
soak: ## the randomized fault tests of e2e/safety, long: more rounds, calls and seeds than make test; about 15 minutes
	@scripts/ensure-tools
	LOCKGATE_SOAK=1 $(GO) run ./scripts/gotest -race -count=1 -timeout 60m -run '^(TestFaultMatrix|TestRandomFaults|TestSemaphoreRandomFaults)$$' ./e2e/safety/

check: ## formatting, vet, staticcheck (tools/lab too), and generated code in sync
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) -C tools/lab vet ./...
	staticcheck="$$($(GO) tool -n staticcheck)" && cd tools/lab && "$$staticcheck" ./...
	$(GO) generate ./...
	@git diff --exit-code -- . || { echo "go generate changed the files above: regenerate and commit them"; exit 1; }

check-spec: ## lint openapi.yaml with Redocly and check the TypeScript client generated from it (Node 22 LTS)
	@node -e 'process.exit(parseInt(process.versions.node) < 22 ? 1 : 0)' || \
		echo "note: Node $$(node --version) is past end of life; examples/node asks for Node 22 LTS (checking anyway; Redocly will say so too)" >&2
	cd examples/node && npm ci --no-audit --no-fund --loglevel=error
	cd examples/node && npm run --silent lint:spec
	cd examples/node && npm run --silent check:gen
	cd examples/node && npm run --silent build

# Contended at 256 waiters too, for #25's target on the hand-off cost
# (16 to 256 waiters): about a minute more.
bench: ## docs/PERFORMANCE.md's benchmark (tools/lab): every target its own process (gateway, HTTP ceiling with and without a plain Redis lock, etcd if installed), 3 rounds of 3 s, medians, checked against #25's targets; about 6 minutes
	@scripts/ensure-tools
	$(GO) -C tools/lab run . --processes --repeat 3 --duration 3s --contended-clients 16,64,256

bench-self: ## the quick benchmark (tools/lab): redis-server and a gateway inside the lab's process, about a minute
	@scripts/ensure-tools
	$(GO) -C tools/lab run . --self
