# presence: `make run` starts the server on 127.0.0.1:9000; `make test` runs every test.
SWIFT ?= swift
HOST ?= 127.0.0.1
PORT ?= 9000
RULES ?= rules/presence.rules.json

.PHONY: deps release run test test-swift test-live bench fuzz clean

deps:
	./scripts/install-deps.sh

release: deps
	$(SWIFT) build -c release --product presence-server

run: release
	.build/release/presence-server --host $(HOST) --port $(PORT) --rules $(RULES)

# Unit, conformance and replay tests (swift test), then live tests against the real server binary.
test: deps
	./scripts/install-deps.sh --test
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	PRESENCE_SERVER=.build/debug/presence-server python3 -m pytest -p no:hypothesispytest -q Tests/live

test-swift:
	$(SWIFT) test

test-live:
	$(SWIFT) build
	PRESENCE_SERVER=.build/debug/presence-server python3 -m pytest -p no:hypothesispytest -q Tests/live

bench: deps
	./bench/run-short.sh

# libFuzzer + ASan on every fuzz target for FUZZ_SECONDS each (default 60); see docs/robustness.md.
fuzz: deps
	./scripts/fuzz.sh

clean:
	rm -rf .build
