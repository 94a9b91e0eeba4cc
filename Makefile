# presence: `make run` builds presence-server and presence-client and serves on 127.0.0.1:9000;
# `make test` runs every test; `make install` puts both programs in $(PREFIX)/bin.
SWIFT ?= swift
HOST ?= 127.0.0.1
PORT ?= 9000
RULES ?= rules/presence.rules.json
PREFIX ?= $(HOME)/.local
BINDIR ?= $(PREFIX)/bin

# Seconds per fuzz target in make test (make fuzz uses FUZZ_SECONDS, default 60).
TEST_FUZZ_SECONDS ?= 30

.PHONY: deps release run install uninstall test test-swift test-live test-hostile test-sanitizers bench fuzz clean

deps:
	./scripts/install-deps.sh

# Both programs, optimised, in .build/release/.
release: deps
	$(SWIFT) build -c release --product presence-server
	$(SWIFT) build -c release --product presence-client
	@echo "built .build/release/presence-server and .build/release/presence-client"

run: release
	.build/release/presence-server --host $(HOST) --port $(PORT) --rules $(RULES)

# `make install PREFIX=/usr/local` (with sudo) for every user; the default needs no root.
install: release
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 .build/release/presence-server .build/release/presence-client "$(DESTDIR)$(BINDIR)/"
	@echo "installed presence-server and presence-client in $(DESTDIR)$(BINDIR)"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "note: $(BINDIR) is not on your PATH";; esac

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/presence-server" "$(DESTDIR)$(BINDIR)/presence-client"

# Unit, conformance and replay tests (swift test), the client transport's self-test against an
# in-process echo server (a few seconds), live tests against the real server binary, then the
# hostile-input checks: every fuzz target briefly, and swift test under ASan and TSan.
test: deps
	./scripts/install-deps.sh --test
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	.build/debug/presence-bench selftest
	PRESENCE_SERVER=.build/debug/presence-server python3 -m pytest -p no:hypothesispytest -q Tests/live
	$(MAKE) test-hostile

# In CI (CI=true) ThreadSanitizer runs only the test targets whose code runs on several threads
# (the loop and its inbox, the storage writer thread, SQLite, the client's transport, Redis on
# the loop), to keep make test within CI's time; make test-sanitizers runs every test under both.
TSAN_CI_FILTER ?= PresenceLoopTests|PresenceServerTests|PresenceStorageTests|PresenceClientTests|PresenceRedisTests

# Fuzzing (TEST_FUZZ_SECONDS per target) and the sanitizer runs; see docs/robustness.md.
test-hostile:
	FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) ./scripts/fuzz.sh
	THREAD_FILTER='$(if $(filter true,$(CI)),$(TSAN_CI_FILTER))' ./scripts/sanitizers.sh

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
