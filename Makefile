# Build and install agentbe-daemon's commands from this clone.
#
#   make install                        # /usr/local/bin (root, or a writable /usr/local)
#   make install PREFIX=$HOME/.local    # ~/.local/bin, no root needed
#   make install DESTDIR=/tmp/stage     # /tmp/stage/usr/local/bin: staged, for a package
#   make build                          # ./bin/ only
#   make bridges                        # dist/agentbe-bridge for macOS and Windows (docs/remote-clients.md)
#   make test                           # the README's test command
#
# The Go toolchain (go.mod's version) builds them; nothing is downloaded
# when the module cache already holds the dependencies. -trimpath keeps
# build paths out of the binaries (and shares the compiled dependencies
# with the tests' own build of agent-backend, internal/testbin).

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DESTDIR ?=
GO ?= go
GOBUILDFLAGS ?= -trimpath

# The daemon (Linux only), its sandbox trampoline (Linux only: the daemon
# starts it from its own directory, faster than starting itself; see
# docs/security.md) and the bridge a client on another machine runs (any OS).
COMMANDS := agent-backend agentbe-sandbox agentbe-bridge
# What `make bridges` builds the bridge for: GOOS/GOARCH pairs.
BRIDGE_TARGETS ?= darwin/arm64 darwin/amd64 windows/amd64

.PHONY: all build install uninstall bridges test

all: build

# go build decides what is out of date (its build cache), so the targets
# always call it rather than track Go's dependencies here.
build:
	@mkdir -p bin
	$(GO) build $(GOBUILDFLAGS) -o bin/ $(addprefix ./cmd/,$(COMMANDS))

# With go on PATH, install builds first; without it (sudo's secure_path
# often leaves it out) it installs what the last `make` built, so
# `make && sudo make install` works.
install:
	@if command -v $(GO) >/dev/null 2>&1; then $(MAKE) --no-print-directory build; \
	elif [ -x bin/agent-backend ]; then echo "make install: $(GO) is not on PATH (sudo?): installing bin/ as the last make built it"; \
	else echo "make install: $(GO) is not on PATH and bin/ is empty: run make as yourself first, then sudo make install" >&2; exit 1; fi
	@p="$(DESTDIR)$(BINDIR)"; while [ ! -e "$$p" ]; do p=$$(dirname "$$p"); done; \
	[ -w "$$p" ] || { echo "make install: $$p is not writable: sudo make install, or make install PREFIX=\$$HOME/.local" >&2; exit 1; }
	install -d "$(DESTDIR)$(BINDIR)"
	for c in $(COMMANDS); do install -m 0755 "bin/$$c" "$(DESTDIR)$(BINDIR)/$$c" || exit 1; done
	@echo "installed $(COMMANDS) in $(DESTDIR)$(BINDIR)"

uninstall:
	for c in $(COMMANDS); do rm -f "$(DESTDIR)$(BINDIR)/$$c"; done

# The bridge for the machines clients run on; no cgo, so no C toolchain
# for the target is needed.
bridges:
	@mkdir -p dist
	for t in $(BRIDGE_TARGETS); do \
	  os=$${t%/*}; arch=$${t#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build $(GOBUILDFLAGS) -o "dist/agentbe-bridge-$$os-$$arch$$ext" ./cmd/agentbe-bridge || exit 1; \
	done

# The README's test command: the root module, then deploy/ and the
# Anthropic adapter, which are modules of their own (-timeout: CONTRIBUTING.md).
test:
	$(GO) test -race -timeout 30m ./... && (cd deploy && $(GO) test -race ./...) && (cd client/adapters/anthropic && $(GO) test -race ./...)
