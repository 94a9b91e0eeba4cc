# presence: `make run` starts the server on 127.0.0.1:9000; `make test` runs every test.
SWIFT ?= swift
HOST ?= 127.0.0.1
PORT ?= 9000
RULES ?= rules/presence.rules.json

# Seconds per fuzz target in make test (make fuzz uses FUZZ_SECONDS, default 60).
TEST_FUZZ_SECONDS ?= 30

.PHONY: deps release run test test-swift test-live test-hostile test-sanitizers bench fuzz clean

deps:
	./scripts/install-deps.sh

release: deps
	$(SWIFT) build -c release --product presence-server

run: release
	.build/release/presence-server --host $(HOST) --port $(PORT) --rules $(RULES)

# Unit, conformance and replay tests (swift test), live tests against the real server binary,
# then the hostile-input checks: every fuzz target briefly, and swift test under ASan and TSan.
test: deps
	./scripts/install-deps.sh --test
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	PRESENCE_SERVER=.build/debug/presence-server python3 -m pytest -p no:hypothesispytest -q Tests/live
	$(MAKE) test-hostile

# Fuzzing (TEST_FUZZ_SECONDS per target) and the sanitizer runs; see docs/robustness.md.
test-hostile:
	FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) ./scripts/fuzz.sh
	./scripts/sanitizers.sh

test-sanitizers:
	./scripts/sanitizers.sh

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
	rm -rf .build .build-fuzz .build-asan .build-tsan
