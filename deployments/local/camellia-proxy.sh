#!/usr/bin/env bash
# camellia-proxy.sh CAMELLIA_SRC: builds NetEase camellia-redis-proxy's
# bootstrap jar from a source tree of github.com/netease-im/camellia (a
# checkout, or `git archive` of a clone, unpacked), for proxy-peers.sh's
# `camellia=JAR` target, and prints the jar's path. Maven Central serves no
# camellia-redis-proxy, hence the build (dependencies from Maven Central;
# `mvn install` puts camellia's snapshot jars in ~/.m2). Its sources need
# Java 21 (pattern switches): the build runs with $JAVA_HOME, by default the
# first JDK of 21 or later under /usr/lib/jvm. No camellia code is kept in
# this repository. Skipped when the jar is there.
set -euo pipefail
# newjdk prints the first JDK of 21 or later under /usr/lib/jvm.
newjdk() { for d in /usr/lib/jvm/*-2[1-9]* /usr/lib/jvm/*-[3-9][0-9]*; do [[ -x $d/bin/java ]] && { echo "$d"; return; }; done; }
(($# == 1)) || { echo "usage: $0 CAMELLIA_SRC" >&2; exit 2; }
src=$(cd "$1" && pwd)
jar=$(ls "$src"/camellia-redis-proxy/camellia-redis-proxy-bootstrap/target/camellia-redis-proxy-bootstrap-*.jar 2>/dev/null | head -1 || true)
if [[ -z $jar ]]; then
	export JAVA_HOME=${JAVA_HOME:-$(newjdk)}
	[[ -x $JAVA_HOME/bin/javac ]] || { echo "camellia-redis-proxy needs a JDK of 21 or later (set JAVA_HOME)" >&2; exit 1; }
	(cd "$src" && mvn -q -B -pl camellia-redis-proxy/camellia-redis-proxy-bootstrap -am -DskipTests \
		-Dmaven.javadoc.skip=true -Djava.version=21 -Dgpg.skip install >&2)
	jar=$(ls "$src"/camellia-redis-proxy/camellia-redis-proxy-bootstrap/target/camellia-redis-proxy-bootstrap-*.jar | head -1)
fi
echo "$jar"
