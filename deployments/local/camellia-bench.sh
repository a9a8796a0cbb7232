#!/usr/bin/env bash
# camellia-bench.sh CAMELLIA_SRC [RATE...]: the peer comparison of issue 43,
# side by side in one run: accesses per CPU-second of NetEase camellia's
# hot-key server against hotspotd alone and hotspotd + broker + ZooKeeper,
# at each RATE (accesses/s; default "200000 500000"), alternating.
#
# CAMELLIA_SRC is a source tree of github.com/netease-im/camellia (a
# checkout, or `git archive` of a clone, unpacked). The script builds its
# modules camellia-hot-key-server-bootstrap and camellia-hot-key-sdk with
# Maven (Java 17: -Djava.version=17; dependencies from Maven Central; the
# build is skipped when the jars are there; `mvn install` puts camellia's
# snapshot jars in the local Maven repository, ~/.m2), and drives the server through
# its SDK at the SDK's defaults (1 s push, 10,000-key cap) with
# camellia/CamelliaDriver.java, our own: the same workload as `hotspot
# bench` (Zipf SKEW over KEYS keys, DURATION, planted keys at 0.8x, 1.2x and
# 3x of 1000/s from 3 s on). Camellia's rule: match_all, 1000 per 1000 ms.
# No camellia code is kept in this repository.
#
# Hotspot runs on a private stack (its own folder and ports, the shared
# stack's Kafka jars: run `make up` once), one partition, a fresh topic,
# group and root per run; `hotspot bench` measures hotspotd's, the broker's
# and ZooKeeper's CPU. Camellia's server CPU is /proc/PID/stat (user +
# system) over the driver's run (workload and 3 s of settle time), like the
# bench's. Neither side counts the load generator or the SDK (the apps).
# The server needs a Redis (its top-N), the private stack's.
#
# Env: KEYS (200000), SKEW (1.1), DURATION (30), RUNS (1: pairs per rate),
# PARTITIONS (1), WARMUP (20: seconds of one unreported run of each side
# first, since a young JVM's JIT compiler costs it seconds of CPU; 0 skips
# it), KEEP=1 keeps the work folder. CPU figures are only worth
# anything on a quiet machine: the script prints `uptime` before each run.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
(($#)) || { echo "usage: $0 CAMELLIA_SRC [RATE...]" >&2; exit 2; }
src=$(cd "$1" && pwd)
shift
rates=("${@:-200000}")
(($#)) || rates=(200000 500000)
keys=${KEYS:-200000} skew=${SKEW:-1.1} duration=${DURATION:-30} runs=${RUNS:-1} parts=${PARTITIONS:-1}
warmup=${WARMUP:-20}
work=$(mktemp -d /tmp/camellia-bench.XXXXXX)
log() { printf 'camellia-bench: %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

libs=$(ls -d "$top"/.stack/kafka-*/libs 2>/dev/null | head -1 || true)
[[ -n $libs ]] || libs=$(ls -d /work/main/.stack/kafka-*/libs 2>/dev/null | head -1 || true)
[[ -n ${HOTSPOT_KAFKA_LIBS:-$libs} ]] || { log "no Kafka jars under .stack/: run 'make up' once"; exit 1; }
export HOTSPOT_STACK_DIR=$work/stack HOTSPOT_KAFKA_LIBS=${HOTSPOT_KAFKA_LIBS:-$libs}
export HOTSPOT_KAFKA_PORT=$(free_port) HOTSPOT_KAFKA_CONTROLLER_PORT=$(free_port)
export HOTSPOT_ZK_PORT=$(free_port) HOTSPOT_REDIS_PORT=$(free_port)

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	"$here/stack.sh" down >/dev/null 2>&1 || true
	if [[ ${KEEP:-} == 1 ]]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# --- camellia: build, unpack, configure ---
hk=$src/camellia-hot-key
boot=$(ls "$hk"/camellia-hot-key-server-bootstrap/target/camellia-hot-key-server-bootstrap-*.jar 2>/dev/null | grep -v sources | head -1 || true)
sdkjar=$(ls "$hk"/camellia-hot-key-sdk/target/camellia-hot-key-sdk-*.jar 2>/dev/null | grep -v sources | head -1 || true)
if [[ -z $boot || -z $sdkjar ]]; then
	log "building camellia's hot-key server and SDK in $src (Maven, Java 17)"
	(cd "$src" && mvn -B -q -Dstyle.color=never -DskipTests -Dmaven.javadoc.skip=true -Dgpg.skip -Djava.version=17 \
		-pl camellia-hot-key/camellia-hot-key-server-bootstrap,camellia-hot-key/camellia-hot-key-sdk -am install) \
		>"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
	boot=$(ls "$hk"/camellia-hot-key-server-bootstrap/target/camellia-hot-key-server-bootstrap-*.jar | grep -v sources | head -1)
	sdkjar=$(ls "$hk"/camellia-hot-key-sdk/target/camellia-hot-key-sdk-*.jar | grep -v sources | head -1)
fi
(cd "$hk/camellia-hot-key-sdk" && mvn -B -q -Dstyle.color=never dependency:build-classpath \
	-Dmdep.outputFile="$work/sdk.cp") >"$work/cp.log" 2>&1 || { cat "$work/cp.log" >&2; exit 1; }
mkdir -p "$work/driver" "$work/server"
javac -d "$work/driver" -cp "$(cat "$work/sdk.cp"):$sdkjar" "$here/camellia/CamelliaDriver.java"
(cd "$work/server" && unzip -q "$boot")
main=$(unzip -p "$boot" META-INF/MANIFEST.MF | tr -d '\r' | awk '/^Start-Class:/{c=$2; getline; if (/^ /) c = c substr($0, 2); print c}')
ns=bench
cat >"$work/server/BOOT-INF/classes/camellia-hot-key-config.properties" <<EOT
$ns=$ns.json
EOT
cat >"$work/server/BOOT-INF/classes/$ns.json" <<EOT
{"namespace": "$ns", "rules": [{"name": "all", "type": "match_all", "checkMillis": 1000, "checkThreshold": 1000, "expireMillis": 10000}]}
EOT

# --- hotspot: binaries and the private stack ---
log "building hotspotd and hotspot; starting a private stack in $work/stack"
(cd "$top" && go build -o "$work/bin/" ./cmd/hotspotd ./cmd/hotspot)
"$here/stack.sh" up >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
eval "$("$here/stack.sh" env)"

cam_port=$(free_port) cam_console=$(free_port)
log "starting camellia's server on 127.0.0.1:$cam_port"
(cd "$work/server" && exec java -Xms512m -Xmx512m --add-opens java.base/java.lang=ALL-UNNAMED -cp "BOOT-INF/classes:BOOT-INF/lib/*" "$main" \
	--server.port="$cam_port" --camellia-hot-key-server.console-port="$cam_console" \
	--camellia-redis.local.resource="redis://@$HOTSPOT_REDIS") >"$work/camellia.log" 2>&1 &
cam_pid=$!
pids+=("$cam_pid")
for _ in $(seq 120); do (exec 3<>"/dev/tcp/127.0.0.1/$cam_port") 2>/dev/null && break; sleep 0.5; done
(exec 3<>"/dev/tcp/127.0.0.1/$cam_port") 2>/dev/null || { tail -30 "$work/camellia.log" >&2; exit 1; }

run_camellia() { # run_camellia RATE [SECONDS]: prints "accesses cpu_seconds [unfair...]"
	local c0 c1 out
	c0=$(cpu_ticks "$cam_pid")
	out=$(java -cp "$(cat "$work/sdk.cp"):$sdkjar:$work/driver" CamelliaDriver "127.0.0.1:$cam_port" "$ns" "$1" \
		"$keys" "$skew" "${2:-$duration}" 1000 0.8,1.2,3 2>>"$work/driver.log")
	c1=$(cpu_ticks "$cam_pid")
	printf '%s\n' "$out" >&2
	awk -v c="$(((c1 - c0)))" -v hz="$hz" '/^sent /{n = $2} /^unfair/{u = " (unfair: generator behind)"} END {print n, c / hz, u}' <<<"$out"
}

run_hotspot() { # run_hotspot RATE N [SECONDS]: prints "accesses pipeline_cpu hotspotd_cpu broker_cpu zk_cpu [unfair...]"
	local t=cb-$2-$(date +%H%M%S) addr hp
	addr=127.0.0.1:$(free_port)
	"$work/bin/hotspotd" --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --redis "$HOTSPOT_REDIS" --topic "$t" \
		--group "$t" --zk-root "/$t" --http-addr "$addr" --id "$t" --partitions "$parts" >"$work/$t.log" 2>&1 &
	hp=$!
	sleep 3
	"$work/bin/hotspot" bench --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --hotspotd "$addr" --zk-root "/$t" \
		--topic "$t" --partitions "$parts" --rate "$1" --keys "$keys" --skew "$skew" --duration "${3:-$duration}s" \
		--flash planted:0.8x@3s=0.8x --flash planted:1.2x@3s=1.2x --flash planted:3x@3s=3x \
		--json "$work/$t.json" --allow-missed >"$work/$t.txt" 2>&1 || true
	kill "$hp"; wait "$hp" 2>/dev/null || true
	grep -E '^(pipeline|accuracy|delay| +crossing)' "$work/$t.txt" >&2 || true
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["events"], d["pipeline_cpu_seconds"], d["hotspotd_cpu_seconds"], d["broker_cpu_seconds"], d["zookeeper_cpu_seconds"], "(unfair: generator behind)" if d["generator_max_lag_ms"] > 1000 else "")' "$work/$t.json"
}

if ((warmup > 0)); then # both JVMs (camellia's server, the broker) compile their hot paths first
	log "warm-up, ${warmup} s each at ${rates[0]}/s (not reported)"
	run_camellia "${rates[0]}" "$warmup" >/dev/null 2>&1
	run_hotspot "${rates[0]}" 0 "$warmup" >/dev/null 2>&1
fi
rows=()
n=0
for rate in "${rates[@]}"; do
	for ((r = 1; r <= runs; r++)); do
		n=$((n + 1))
		log "rate $rate, run $r: camellia; $(uptime)"
		read -r ca cc unfair < <(run_camellia "$rate")
		log "rate $rate, run $r: hotspot; $(uptime)"
		read -r ha hpipe hd hb hz2 hunfair < <(run_hotspot "$rate" "$n")
		rows+=("$(awk -v rate="$rate" -v r="$r" -v ca="$ca" -v cc="$cc" -v unfair="${unfair:+ $unfair}" -v ha="$ha" -v hp="$hpipe" -v hd="$hd" -v hb="$hb" -v hz="$hz2" -v hunfair="${hunfair:+ $hunfair}" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" \
			'BEGIN { printf "| %d/s, run %d | %.2f M (%.2f CPU-s)%s | %.2f M (%.2f) | %.2f M (%.2f + %.2f + %.2f = %.2f; %.2fx)%s | %s |", rate, r, ca / cc / 1e6, cc, unfair, ha / hd / 1e6, hd, ha / hp / 1e6, hd, hb, hz, hp, (ha / hp) / (ca / cc), hunfair, load }')")
	done
done
echo
echo "| accesses per CPU-second | camellia's server | hotspotd alone | hotspotd + broker + ZooKeeper (vs camellia) | load average after |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
