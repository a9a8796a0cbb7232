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
	# Installed beside, then moved in: a concurrent run sees the old
	# install or the new one.
	tmp=$dir.tmp.$$
	trap 'rm -rf "$tmp"' EXIT
	rm -rf "$tmp"
	mkdir -p "$tmp"
	cp "$src/package.json" "$src/package-lock.json" "$tmp/"
	if ! (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error >&2); then
		echo "ioredisenv: could not install ioredis from the npm registry" >&2
		exit 1
	fi
	echo "$stamp" >"$tmp/stamp"
	rm -rf "$dir"
	mv "$tmp" "$dir"
fi
echo "$dir/node_modules"
