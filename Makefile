# presence: `make run` builds presence-server and presence-client and serves on 127.0.0.1:9000;
# `make test` runs every test; `make install` puts both programs in $(PREFIX)/bin.
SWIFT ?= swift
HOST ?= 127.0.0.1
PORT ?= 9000
RULES ?= rules/presence.rules.json
PREFIX ?= $(HOME)/.local
BINDIR ?= $(PREFIX)/bin

.PHONY: deps release run install uninstall test test-swift test-live bench clean

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
# in-process echo server (a few seconds), then live tests against the real server binary.
test: deps
	./scripts/install-deps.sh --test
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	.build/debug/presence-bench selftest
	PRESENCE_SERVER=.build/debug/presence-server python3 -m pytest -p no:hypothesispytest -q Tests/live

test-swift:
	$(SWIFT) test

test-live:
	$(SWIFT) build
	PRESENCE_SERVER=.build/debug/presence-server python3 -m pytest -p no:hypothesispytest -q Tests/live

bench: deps
	./bench/run-short.sh

clean:
	rm -rf .build
