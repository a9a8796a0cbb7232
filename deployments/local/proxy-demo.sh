#!/usr/bin/env bash
# proxy-demo.sh: a non-Go client protected by hotspot-proxy (docs/proxy.md).
# Starts hotspotd and a proxy on the local stack (`make up`), then
# redis-benchmark (C, nobody here wrote it) hammers one flash key with GET
# through the proxy, beside cold SET traffic. Every second it prints the GETs
# Redis itself ran (INFO commandstats: the only GETs are the flash key's) and
# the proxy's HOTSPOT INFO hits: Redis' GET rate falls to about zero once the
# key is promoted. Then hotspotd's line for the proxy (GET /v1/instances, as
# its live page shows it): the proxy's reads of hot keys, as it reported
# them. Last, the key is written on Redis itself, past the proxy: the proxy
# answers the new value at once (client tracking), not after its L1 TTL. Run
# from the repository root; stops what it started.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(deployments/local/stack.sh env)"
secs=${DEMO_SECONDS:-20}
id=proxydemo$$
mkdir -p bin
go build -o bin/hotspotd ./cmd/hotspotd
go build -o bin/hotspot-proxy ./cmd/hotspot-proxy
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
log=${HOTSPOT_STACK_DIR:-.stack}/$id
mkdir -p "$log"
bin/hotspotd --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" --group "$id" \
	--http-addr 127.0.0.1:27071 --redis "" --threshold 1000 >"$log/hotspotd.log" 2>&1 &
pids+=($!)
bin/hotspot-proxy --app shop --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" \
	--redis "$HOTSPOT_REDIS" --listen 127.0.0.1:26380 --http 127.0.0.1:26381 >"$log/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p 26380 ping >/dev/null 2>&1 && break; sleep 0.1; done
rhost=${HOTSPOT_REDIS%:*} rport=${HOTSPOT_REDIS##*:}
redis-cli -h "$rhost" -p "$rport" set "$id:flash" "the flash sale" >/dev/null
gets() { redis-cli -h "$rhost" -p "$rport" info commandstats | sed -n 's/^cmdstat_get:calls=\([0-9]*\),.*/\1/p'; }
hits() { redis-cli -p 26380 hotspot info | sed -n 's/^hits:\([0-9]*\).*/\1/p'; }
redis-benchmark -p 26380 -c 20 -n 100000000 -r 100000 -t set -q >/dev/null 2>&1 &
pids+=($!)
sleep 2
echo "flash key $id:flash: redis-benchmark GETs it through the proxy from now on"
redis-benchmark -p 26380 -c 20 -n 100000000 -q GET "$id:flash" >/dev/null 2>&1 &
pids+=($!)
g0=$(gets) h0=$(hits)
for s in $(seq "$secs"); do
	sleep 1
	g=$(gets) h=$(hits)
	hot=$(redis-cli -p 26380 hotspot keys | tr '\n' ' ')
	printf '%3ds  Redis GETs/s %7d   proxy L1 hits/s %7d   hot: %s\n' "$s" $((g - g0)) $((h - h0)) "${hot:-none}"
	g0=$g h0=$h
done
echo "hotspotd's line for this proxy (GET /v1/instances; its live page is http://127.0.0.1:27071/), per second over the last 10 s:"
curl -s 'http://127.0.0.1:27071/v1/instances?app=shop' | python3 -c '
import json, sys
for i in json.load(sys.stdin)["instances"]:
    print("  %s: %s from its L1, %s to Redis, %s limited; %.1f %% from memory" % (i["instance"],
          format(round(i["l1_hits"]), ","), format(round(i["l2_reads"]), ","), format(round(i["limited"]), ","),
          100 * i.get("served_l1", 0)))'
echo "a write made on Redis itself, past the proxy (redis-cli SET): Redis' client tracking tells the proxy"
t0=$(date +%s%N)
redis-cli -h "$rhost" -p "$rport" set "$id:flash" "the sale is over" >/dev/null
for _ in $(seq 200); do
	[[ $(redis-cli -p 26380 get "$id:flash") == "the sale is over" ]] && break
	sleep 0.01
done
echo "  the proxy answers the new value $((($(date +%s%N) - t0) / 1000000)) ms after the write (its L1 TTL is 10 s; redis-cli's own start included)"
redis-cli -p 26380 hotspot info | tr -d '\r' | grep -E 'hits|misses|limited|ratio'
redis-cli -h "$rhost" -p "$rport" del "$id:flash" >/dev/null
