#!/usr/bin/env bash
# proxy-bench.sh: the figures of hotspot-proxy (docs/proxy.md), on the
# local stack (`make up`). Run on a quiet machine and record the output in
# BENCHMARKS.md with the machine's description: on a 2-core machine the proxy,
# Redis and redis-benchmark share the cores. N (default 100000) sets -n.
#   1. redis-benchmark -t get,set -c 50 -r 100000, -P 1 and -P 16: direct, through a bare pipe
#      (deployments/local/pipefloor: the extra hop alone), then through the proxy
#   1b. the latency of one client (-c 1): direct, then through the proxy
#   1c. the latency at fixed rates (5,000 and 20,000/s over 50 connections): direct, then through the proxy
#   2. the proxy's CPU per request (its utime+stime over the run / requests)
#   3. one hot key: GET throughput direct, and through the proxy once promoted; Redis' GETs meanwhile
#   4. flash keys among cold keys at 20 clients: time from a key's crossing of 1,000/s to its first L1 answer
#   5. with HOTSPOT_REDIS_CLUSTER set (`stack.sh up --redis-cluster`): a proxy in cluster mode against the
#      cluster itself, redis-benchmark -t get,set -r 10000, -P 1 (-n N) and -P 16 (-n 6N)
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(deployments/local/stack.sh env)"
n=${N:-100000}
id=proxybench$$
mkdir -p bin
go build -o bin/hotspotd ./cmd/hotspotd
go build -o bin/hotspot-proxy ./cmd/hotspot-proxy
go build -o bin/proxyflash ./deployments/local/proxyflash
go build -o bin/proxylat ./deployments/local/proxylat
go build -o bin/pipefloor ./deployments/local/pipefloor
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
log=${HOTSPOT_STACK_DIR:-.stack}/$id
mkdir -p "$log"
bin/hotspotd --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" --group "$id" \
	--http-addr 127.0.0.1:27072 --redis "" --threshold 1000 >"$log/hotspotd.log" 2>&1 &
pids+=($!)
bin/hotspot-proxy --app bench --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" \
	--redis "$HOTSPOT_REDIS" --listen 127.0.0.1:26390 --http 127.0.0.1:26391 >"$log/proxy.log" 2>&1 &
proxy=$!
pids+=($proxy)
bin/pipefloor --listen 127.0.0.1:26395 --redis "$HOTSPOT_REDIS" &
pids+=($!)
for _ in $(seq 100); do redis-cli -p 26390 ping >/dev/null 2>&1 && break; sleep 0.1; done
rhost=${HOTSPOT_REDIS%:*} rport=${HOTSPOT_REDIS##*:}
cpu() { awk '{print $14+$15}' "/proc/$proxy/stat"; }
hz=$(getconf CLK_TCK)
gets() { redis-cli -h "$rhost" -p "$rport" info commandstats | sed -n 's/^cmdstat_get:calls=\([0-9]*\),.*/\1/p'; }
echo "== 1, 2: cold keys (nproc=$(nproc); proxy, Redis and redis-benchmark share these cores)"
for P in 1 16; do
	echo "-- direct -P $P"
	redis-benchmark -h "$rhost" -p "$rport" -t get,set -n "$n" -c 50 -r 100000 -P "$P" -q
	echo "-- through a bare pipe -P $P (the hop alone)"
	redis-benchmark -p 26395 -t get,set -n "$n" -c 50 -r 100000 -P "$P" -q
	c0=$(cpu)
	echo "-- through the proxy -P $P"
	redis-benchmark -p 26390 -t get,set -n "$n" -c 50 -r 100000 -P "$P" -q
	c1=$(cpu)
	awk -v c=$((c1 - c0)) -v hz="$hz" -v n=$((2 * n)) 'BEGIN{printf "proxy CPU: %.2f s for %d requests, %.1f us per request\n", c/hz, n, c/hz/n*1e6}'
done
echo "== 1b: latency of one client at a time (-c 1, far below saturation: redis-benchmark has no rate limit), ms"
lat() { redis-benchmark "$@" -t get,set -n 20000 -c 1 -r 100000 --csv | sed -n 's/^"\(GET\|SET\)","\([0-9.]*\)","[0-9.]*","[0-9.]*","\([0-9.]*\)","[0-9.]*","\([0-9.]*\)".*/\1 rps \2 p50 \3 p99 \4/p'; }
echo "-- direct"
lat -h "$rhost" -p "$rport"
echo "-- through the proxy"
lat -p 26390
echo "== 1c: latency at fixed rates, 50 connections, cold keys (deployments/local/proxylat; counted from when each command was due)"
for rate in 5000 20000; do
	for cmd in get set; do
		bin/proxylat -addr "$HOTSPOT_REDIS" -rate "$rate" -cmd "$cmd" -d 10s
		bin/proxylat -addr 127.0.0.1:26390 -rate "$rate" -cmd "$cmd" -d 10s
	done
done
echo "== 3: one hot key"
redis-cli -h "$rhost" -p "$rport" set "$id:hot" v >/dev/null
echo "-- direct"
redis-benchmark -h "$rhost" -p "$rport" -n "$n" -c 50 -q GET "$id:hot"
redis-benchmark -p 26390 -n "$n" -c 50 -q GET "$id:hot" >/dev/null # promotes it
for _ in $(seq 50); do [[ -n $(redis-cli -p 26390 hotspot keys) ]] && break; sleep 0.1; done
g0=$(gets)
echo "-- through the proxy, promoted"
redis-benchmark -p 26390 -n "$n" -c 50 -q GET "$id:hot"
echo "Redis GETs meanwhile: $(($(gets) - g0))"
echo "== 4: flash keys (4 connections, one GET at a time each; deployments/local/proxyflash) among 1,000,000 cold keys (20 clients)"
redis-benchmark -p 26390 -c 20 -n 100000000 -r 1000000 -t get -q >/dev/null 2>&1 &
cold=$!
pids+=($cold)
sleep 3
for k in a b c; do
	redis-cli -h "$rhost" -p "$rport" set "$id:flash$k" v >/dev/null
	bin/proxyflash -addr 127.0.0.1:26390 "$id:flash$k" || true
done
redis-cli -h "$rhost" -p "$rport" del "$id:hot" "$id:flasha" "$id:flashb" "$id:flashc" >/dev/null
kill "$cold" 2>/dev/null || true
[[ -n ${HOTSPOT_REDIS_CLUSTER:-} ]] || exit 0
echo "== 5: cluster mode (the stack's Redis Cluster: $HOTSPOT_REDIS_CLUSTER)"
bin/hotspot-proxy --app bench --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" \
	--redis-cluster "$HOTSPOT_REDIS_CLUSTER" --listen 127.0.0.1:26392 --http 127.0.0.1:26393 >"$log/proxy-cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p 26392 ping >/dev/null 2>&1 && break; sleep 0.1; done
seed=${HOTSPOT_REDIS_CLUSTER%%,*}
for P in 1 16; do
	m=$n
	((P == 1)) || m=$((6 * n))
	echo "-- the cluster directly (--cluster) -P $P"
	redis-benchmark -h "${seed%:*}" -p "${seed##*:}" --cluster -t get,set -n "$m" -r 10000 -P "$P" -q
	echo "-- through the proxy in cluster mode -P $P"
	redis-benchmark -p 26392 -t get,set -n "$m" -r 10000 -P "$P" -q
done
