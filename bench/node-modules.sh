#!/usr/bin/env bash
# Installs bench/node_modules from bench/package-lock.json (the reference
# daemon bench/compare.sh measures, Playwright MCP for bench/browser/peer.sh)
# when the installed tree lacks a package of the lockfile or has another
# version of it. npm ci wipes node_modules, which both scripts share, so it
# runs only then; an optional package npm did not install (another
# platform's) is not missing. No browser is downloaded: both scripts use the
# system's Chromium.
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
if cmp -s "$bench/package-lock.json" "$bench/node_modules/.package-lock.json" 2>/dev/null ||
	node -e 'const a=require(process.argv[1]).packages,b=require(process.argv[2]).packages;for(const k in a){if(k&&!(a[k].optional&&!b[k])&&(!b[k]||b[k].version!==a[k].version))process.exit(1)}' \
		"$bench/package-lock.json" "$bench/node_modules/.package-lock.json" 2>/dev/null; then
	exit 0
fi
echo "== installing bench/node_modules (npm ci in bench/)" >&2
cd "$bench" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2
