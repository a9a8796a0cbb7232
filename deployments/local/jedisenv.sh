#!/usr/bin/env bash
# jedisenv.sh: Jedis from Maven Central and proxy/testdata/jedis/JedisCheck.java
# compiled against it, for the proxy's client test (TestClientJedis).
# Idempotent: rebuilds only when the pom or the source changed; after the
# first run it needs no network (Maven's cache is ~/.m2). Prints the classpath.
#   ${HOTSPOT_STACK_DIR:-<repo>/.stack}/jedis/{lib,classes}; needs mvn and javac (17).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
src=$here/proxy/testdata/jedis
dir=${HOTSPOT_STACK_DIR:-$here/.stack}/jedis
for tool in mvn javac java; do
	command -v "$tool" >/dev/null || { echo "jedisenv: $tool is not installed (Debian: maven, openjdk-17-jdk-headless)" >&2; exit 1; }
done
stamp=$(cat "$src/pom.xml" "$src/JedisCheck.java" | sha256sum | cut -d' ' -f1)
if [[ $(cat "$dir/stamp" 2>/dev/null) != "$stamp" ]]; then
	# Built beside, then moved in: a concurrent run sees the old build or
	# the new one.
	tmp=$dir.tmp.$$
	trap 'rm -rf "$tmp"' EXIT
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# Debian's Maven 3.8 writes colour resets even with -B: its output goes
	# to a log, shown without escapes only when the fetch fails.
	if ! mvn -q -B -Dstyle.color=never -f "$src/pom.xml" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$tmp/lib" >"$tmp/maven.log" 2>&1; then
		sed 's/\x1b\[[0-9;]*m//g' "$tmp/maven.log" >&2
		echo "jedisenv: could not fetch Jedis from Maven Central" >&2
		exit 1
	fi
	javac -nowarn -d "$tmp/classes" -cp "$tmp/lib/*" "$src/JedisCheck.java" >&2
	echo "$stamp" >"$tmp/stamp"
	rm -rf "$dir"
	mv "$tmp" "$dir"
fi
echo "$dir/classes:$dir/lib/*"
