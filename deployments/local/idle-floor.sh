#!/usr/bin/env bash
# idle-floor.sh: what the pipeline costs with no traffic (BENCHMARKS.md P9).
# A fresh private stack (its own folder and ports, the shared stack's Kafka
# jars: run `make up` once), hotspotd with one partition as camellia-bench.sh
# runs it, and no traffic; prints the CPU-seconds of hotspotd, the broker and
# ZooKeeper over three 33 s windows (the length of a bench run), 27 s apart.
set -euo pipefail
cd "$(dirname "$0")/../.."
export HOTSPOT_STACK_DIR=/tmp/idle-stack HOTSPOT_KAFKA_LIBS=$PWD/.stack/kafka-4.4.0/libs \
  HOTSPOT_KAFKA_PORT=39092 HOTSPOT_KAFKA_CONTROLLER_PORT=39093 HOTSPOT_ZK_PORT=32181 HOTSPOT_REDIS_PORT=36379
rm -rf /tmp/idle-stack
deployments/local/stack.sh up >/dev/null 2>&1
go build -o /tmp/idle-stack/bin/ ./cmd/hotspotd
/tmp/idle-stack/bin/hotspotd --brokers 127.0.0.1:39092 --zk 127.0.0.1:32181 --redis 127.0.0.1:36379 --topic idle --group idle \
  --zk-root /idle --http-addr 127.0.0.1:37171 --id idle --partitions 1 >/tmp/idle-stack/hotspotd.log 2>&1 &
hp=$!
kp=$(pgrep -f "idle-stack.*server.properties" | head -1); zp=$(pgrep -f "idle-stack.*zoo.cfg" | head -1)
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
tck=$(getconf CLK_TCK)
for round in 1 2 3; do
  sleep 27
  a=($(cpu $hp) $(cpu $kp) $(cpu $zp)); sleep 33; b=($(cpu $hp) $(cpu $kp) $(cpu $zp))
  echo "idle 33 s, round $round ($(cut -d' ' -f1-3 /proc/loadavg)): hotspotd $(echo "scale=2;(${b[0]}-${a[0]})/$tck"|bc) broker $(echo "scale=2;(${b[1]}-${a[1]})/$tck"|bc) zookeeper $(echo "scale=2;(${b[2]}-${a[2]})/$tck"|bc) CPU-s"
done
kill "$hp"; wait "$hp" || true
deployments/local/stack.sh down >/dev/null 2>&1
