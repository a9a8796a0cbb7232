#!/usr/bin/env bash
# broker-restart.sh [DOWN...]: how soon after a broker outage a new hot key
# is listed, with the real binaries on a private stack of their own
# (docs/detector.md, "Broker restart"; BENCHMARKS.md).
#
# A private stack (its own folder and ports, the shared stack's Kafka jars)
# and two hotspotd processes (both roles, 8 partitions). A background
# workload (`hotspot load`, Zipf keys plus three keys at 2x) runs
# throughout. For each DOWN (seconds; default "0 5 12 30") the broker stops
# with SIGTERM, stays down DOWN seconds and comes back with `stack.sh up`;
# as soon as `up` returns a second `hotspot load` plants a new key at 2x,
# and the script prints how long after `up` returned each hotspotd's
# /v1/hotkeys listed it (sampled every 100 ms).
#
# It also prints when each detector had its partitions again (its log's
# "partitions assigned"), to tell a slow rejoin from a slow detection. KEEP=1
# keeps the folder with the processes' logs. RUNS (1) repeats each outage. Needs the shared stack's jars: `make up`
# once. Everything runs on 127.0.0.1 and is stopped at the end. The secured
# stack's case is TestSecureBrokerRestart (cmd/hotspotd).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
downs=("${@:-0 5 12 30}")
read -r -a downs <<<"${downs[*]}"
runs=${RUNS:-1}
work=$(mktemp -d /tmp/hotspot-broker-restart.XXXXXX)
bin=$work/bin

log() { printf 'broker-restart: %s\n' "$*" >&2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

libs=$(ls -d "$top"/.stack/kafka-*/libs 2>/dev/null | head -1)
[[ -n $libs ]] || { log "no Kafka jars under .stack/: run 'make up' once"; exit 1; }

export HOTSPOT_STACK_DIR=$work/stack HOTSPOT_KAFKA_LIBS=$libs HOTSPOT_KAFKA_HEAP=256m
export HOTSPOT_KAFKA_PORT=$(free_port) HOTSPOT_KAFKA_CONTROLLER_PORT=$(free_port)
export HOTSPOT_ZK_PORT=$(free_port) HOTSPOT_REDIS_PORT=$(free_port)
stack() { "$here/stack.sh" "$@"; }

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	stack down >/dev/null 2>&1 || true
	if [[ ${KEEP:-} == 1 ]]; then log "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

log "building into $bin"
(cd "$top" && go build -o "$bin/" ./cmd/hotspotd ./cmd/hotspot)
stack up >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
eval "$(stack env)"
topic=restart group=restart root=/restart
addrs=()
for id in n1 n2; do
	a=127.0.0.1:$(free_port)
	addrs+=("$a")
	"$bin/hotspotd" --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --topic "$topic" --group "$group" --zk-root "$root" --http-addr "$a" --id "$id" \
		--partitions 8 >"$work/$id.log" 2>&1 &
	pids+=($!)
done
for a in "${addrs[@]}"; do
	for _ in $(seq 300); do curl -fs "http://$a/readyz" >/dev/null && break; sleep 0.1; done
done
total=$(( ${#downs[@]} * runs * 90 + 60 ))
"$bin/hotspot" load --brokers "$HOTSPOT_KAFKA" --hotspotd "${addrs[0]}" --topic "$topic" --rate 20000 --keys 100000 --duration "${total}s" \
	--flash 'old:a@0s=2x old:b@0s=2x old:c@0s=2x' >"$work/load.log" 2>&1 &
pids+=($!)
sleep 10

listed() { # listed KEY ADDR: ADDR's /v1/hotkeys lists KEY
	curl -fs --max-time 1 "http://$2/v1/hotkeys?app=app0" | grep -q "\"key\": *\"$1\""
}

# assigned EPOCH: seconds from EPOCH to each hotspotd's first "partitions
# assigned" after it (when its detector had its partitions again).
assigned() {
	python3 - "$1" "$work"/n1.log "$work"/n2.log <<'PY'
import datetime, sys
back = float(sys.argv[1])
out = []
for f in sys.argv[2:]:
    got = "never"
    for line in open(f):
        if 'msg="detector: partitions assigned"' not in line or not line.startswith("time="):
            continue
        t = datetime.datetime.fromisoformat(line.split()[0][5:].replace("Z", "+00:00")).timestamp()
        if t > back:
            got = "%.2f" % (t - back)
            break
    out.append(got)
print(" ".join(out))
PY
}

printf 'down_s\trun\tup_s\tlisted_after_s (n1 n2)\tgroup_after_s (n1 n2)\n'
for down in "${downs[@]}"; do
	for run in $(seq "$runs"); do
		key=new:$down:$run
		stack stop kafka >/dev/null
		sleep "$down"
		t0=$(date +%s.%N)
		stack up >>"$work/up.log" 2>&1
		back=$(date +%s.%N)
		"$bin/hotspot" load --brokers "$HOTSPOT_KAFKA" --hotspotd "${addrs[0]}" --topic "$topic" --rate 0 --duration 20s \
			--flash "$key@0s=2x" >"$work/plant.log" 2>&1 &
		plant=$!
		got=()
		for a in "${addrs[@]}"; do
			while :; do
				now=$(date +%s.%N)
				if listed "$key" "$a"; then got+=("$(echo "$now - $back" | bc)"); break; fi
				if (($(echo "$now - $back > 30" | bc))); then got+=(never); break; fi
				sleep 0.1
			done
		done
		kill "$plant" 2>/dev/null || true
		wait "$plant" 2>/dev/null || true
		printf '%s\t%s\t%.2f\t%s\t%s\n' "$down" "$run" "$(echo "$back - $t0" | bc)" "${got[*]}" "$(assigned "$back")"
		sleep 25 # the planted key turns cold; the group settles
	done
done
