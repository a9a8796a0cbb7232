#!/usr/bin/env bash
# soak.sh: run one hotspotd (detector and aggregator) against the local stack
# under `hotspot load` at SOAK_RATE events/s (100000) for SOAK_DURATION (30m),
# with keys turning hot and cold all along (a wave key every 60 s, hot for
# 30 s at 3x the threshold, plus fixed keys at 0.5x and 2x). Every
# SOAK_SAMPLE (30s) it records hotspotd's resident memory, goroutines and
# open files in $SOAK_OUT/soak.csv (default bin/soak-<time>/), and at the end
# prints them after warm-up (SOAK_WARMUP, 5m): first, last and maximum.
# It uses a topic and ZooKeeper root of its own and stops what it started.
# Not in CI: `make soak` runs it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
cd "$top"
rate=${SOAK_RATE:-100000}
duration=${SOAK_DURATION:-30m}
sample=${SOAK_SAMPLE:-30}
warmup=${SOAK_WARMUP:-300}
name=soak-$(date +%s)
out=${SOAK_OUT:-$top/bin/$name}
port=${SOAK_PORT:-17070}
mkdir -p "$out"
eval "$("$here/stack.sh" env)"
go build -o bin/ ./cmd/hotspotd ./cmd/hotspot

case $duration in # Nm or Ns
*m) secs=$((${duration%m} * 60)) ;;
*s) secs=${duration%s} ;;
*) echo "soak: SOAK_DURATION must be Nm or Ns" >&2; exit 2 ;;
esac
flashes=(--flash "shop/fixed:2x@0s=2x" --flash "shop/fixed:0.5x@0s=0.5x")
for ((i = 0; i * 60 < secs; i++)); do
	flashes+=(--flash "shop/wave:$i@$((i * 60))s+2s..$((i * 60 + 30))s=3x")
done

bin/hotspotd --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --topic "$name" --group "$name" \
	--zk-root "/$name" --http-addr "127.0.0.1:$port" --id soak --partitions 8 >"$out/hotspotd.log" 2>&1 &
hpid=$!
cleanup() {
	kill "$lpid" 2>/dev/null || true
	kill "$hpid" 2>/dev/null || true
	wait "$hpid" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 150); do curl -fs "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done

bin/hotspot load --brokers "$HOTSPOT_KAFKA" --topic "$name" --rate "$rate" --duration "$duration" \
	"${flashes[@]}" --truth "$out/truth.json" >"$out/load.log" 2>&1 &
lpid=$!

echo "elapsed_s,rss_kib,goroutines,open_fds,hot_keys" >"$out/soak.csv"
start=$(date +%s)
while kill -0 "$lpid" 2>/dev/null; do
	sleep "$sample"
	kill -0 "$hpid" 2>/dev/null || { echo "soak: hotspotd exited; see $out/hotspotd.log" >&2; exit 1; }
	# A sample that fails (a busy machine, no hot key at all) is recorded
	# empty rather than ending the run.
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$hpid/status" || true)
	fds=$(ls "/proc/$hpid/fd" | wc -l || true)
	gor=$( (curl -fs -m 5 "127.0.0.1:$port/metrics" || true) | awk '$1 == "go_goroutines" {print $2}')
	hot=$( (curl -fs -m 5 "127.0.0.1:$port/v1/hotkeys?app=shop" || true) | { grep -o '"key"' || true; } | wc -l)
	echo "$(($(date +%s) - start)),$rss,$gor,$fds,$hot" >>"$out/soak.csv"
done
wait "$lpid" || { echo "soak: the load generator failed; see $out/load.log" >&2; exit 1; }
tail -n 3 "$out/load.log"
awk -F, -v w="$warmup" 'NR > 1 && $1 >= w && $2 != "" && $3 != "" {
	if (!n++) { r0 = $2; g0 = $3; f0 = $4 }
	r = $2; g = $3; f = $4
	if ($2 > rm) rm = $2; if ($3 > gm) gm = $3; if ($4 > fm) fm = $4
} END {
	if (!n) { print "soak: no sample after warm-up"; exit 1 }
	printf "after warm-up (%d samples): rss_kib first %d last %d max %d; goroutines first %d last %d max %d; open_fds first %d last %d max %d\n", n, r0, r, rm, g0, g, gm, f0, f, fm
}' "$out/soak.csv"
echo "soak: samples in $out/soak.csv"
