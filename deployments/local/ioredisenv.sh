#!/usr/bin/env bash
# ioredisenv.sh: ioredis from the npm registry, for the proxy's client test
# (proxy/testdata/ioredis/check.js, TestClientIoredis). Idempotent: runs
# `npm ci` only when package.json or the lockfile changed; after the first
# run it needs no network. Prints the node_modules folder (for NODE_PATH).
#   ${HOTSPOT_STACK_DIR:-<repo>/.stack}/ioredis/node_modules; needs node and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
src=$here/proxy/testdata/ioredis
dir=${HOTSPOT_STACK_DIR:-$here/.stack}/ioredis
for tool in node npm; do
	command -v "$tool" >/dev/null || { echo "ioredisenv: $tool is not installed (Debian: nodejs, npm)" >&2; exit 1; }
done
stamp=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
if [[ $(cat "$dir/stamp" 2>/dev/null) != "$stamp" ]]; then
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$src/package.json" "$src/package-lock.json" "$dir/"
	if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2); then
		echo "ioredisenv: could not install ioredis from the npm registry" >&2
		exit 1
	fi
	echo "$stamp" >"$dir/stamp"
fi
echo "$dir/node_modules"
