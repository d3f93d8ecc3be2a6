# The README's commands. `make test` is also what CI runs (.ci/run).

GO ?= go

.PHONY: run test check check-spec bench

run: ## start a development gateway: embedded backend, loopback, printed token
	$(GO) run ./cmd/gateway --dev

test: ## the whole suite, against real redis-servers it starts itself
	@scripts/ensure-tools
	$(GO) test -race -count=1 -timeout 10m ./...

check: ## formatting, vet, staticcheck, and generated code in sync
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) generate ./...
	@git diff --exit-code -- . || { echo "go generate changed the files above: regenerate and commit them"; exit 1; }

check-spec: ## lint openapi.yaml and check the TypeScript client generated from it (needs Node >= 20.19)
	cd examples/node && npm ci --no-audit --no-fund --loglevel=error
	cd examples/node && npm run --silent lint:spec
	cd examples/node && npm run --silent check:gen
	cd examples/node && npm run --silent build

bench: ## docs/PERFORMANCE.md's benchmark: starts its own redis-server and gateway, about a minute
	@scripts/ensure-tools
	$(GO) run ./cmd/lockbench --self
