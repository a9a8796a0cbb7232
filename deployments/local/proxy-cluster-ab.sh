#!/usr/bin/env bash
# proxy-cluster-ab.sh: the cluster-mode proxy with connections of each client's
# own (--upstream dedicated) against shared ones (--upstream shared), in
# alternated rounds, in front of the stack's Redis Cluster (BENCHMARKS.md X3b).
# Needs `make up` and `deployments/local/stack.sh up --redis-cluster`. Run on a
# quiet machine: the proxy, the six nodes and redis-benchmark share the cores.
# ROUNDS (3) rounds of MODES ("dedicated shared": the order within a round);
# N (100000) sets -n at -P 1, 6N at -P 16; -c 50, -r 100000.
# Per run: requests/s, the proxy's CPU per request and the masters' (the sum
# of the three masters' utime+stime over the run, per request).
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(deployments/local/stack.sh env)"
eval "$(deployments/local/stack.sh env --redis-cluster)"
rounds=${ROUNDS:-3} n=${N:-100000}
id=clusterab$$
mkdir -p bin
go build -o bin/hotspot-proxy ./cmd/hotspot-proxy
log=${HOTSPOT_STACK_DIR:-.stack}/$id
mkdir -p "$log"
proxy=
cleanup() { [[ -z $proxy ]] || kill "$proxy" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
masters=()
for a in ${HOTSPOT_REDIS_CLUSTER//,/ }; do
	if redis-cli -h "${a%:*}" -p "${a##*:}" info replication | grep -q '^role:master'; then
		masters+=("$(redis-cli -h "${a%:*}" -p "${a##*:}" info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')")
	fi
done
((${#masters[@]} == 3)) || { echo "want 3 masters, found ${#masters[@]}" >&2; exit 1; }
cpu() { awk '{s += $14 + $15} END {print s}' "$@"; }
stats() { for p in "${masters[@]}"; do echo "/proc/$p/stat"; done; }
start() { # start MODE: a cluster-mode proxy with --upstream MODE
	bin/hotspot-proxy --app bench --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" \
		--redis-cluster "$HOTSPOT_REDIS_CLUSTER" --upstream "$1" --listen 127.0.0.1:26396 --http 127.0.0.1:26397 \
		>>"$log/proxy-$1.log" 2>&1 &
	proxy=$!
	for _ in $(seq 100); do redis-cli -p 26396 ping >/dev/null 2>&1 && break; sleep 0.1; done
}
stop() { kill "$proxy"; wait "$proxy" 2>/dev/null || true; proxy=; }
echo "nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg); masters' pids ${masters[*]}"
for r in $(seq "$rounds"); do
	for mode in ${MODES:-dedicated shared}; do
		start "$mode"
		redis-benchmark -p 26396 -t get,set -n 20000 -c 50 -r 100000 -q >/dev/null # warm-up: every client's connections
		for P in 1 16; do
			m=$n
			((P == 1)) || m=$((6 * n))
			p0=$(cpu "/proc/$proxy/stat") r0=$(cpu $(stats))
			out=$(redis-benchmark -p 26396 -t get,set -n "$m" -c 50 -r 100000 -P "$P" -q | tr '\r' '\n' | grep 'requests per second' | tr '\n' ' ')
			p1=$(cpu "/proc/$proxy/stat") r1=$(cpu $(stats))
			awk -v r="$r" -v mode="$mode" -v P="$P" -v out="$out" -v pc=$((p1 - p0)) -v rc=$((r1 - r0)) -v hz="$hz" -v n=$((2 * m)) \
				'BEGIN{printf "round %s %-9s -P %-2s %s| proxy %.1f us, masters %.1f us per request\n", r, mode, P, out, pc/hz/n*1e6, rc/hz/n*1e6}'
		done
		stop
	done
done
