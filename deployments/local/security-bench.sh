#!/usr/bin/env bash
# security-bench.sh: the cost of security. The same `hotspot bench` on the plain and the secured stack,
# back to back (both stacks up: make up; make up SECURE=1). BIN (bin) holds hotspotd and hotspot; RATE (50000).
set -euo pipefail
bin=${BIN:-bin}
flags=(--rate ${RATE:-50000} --skew 0.8 --duration 20s)
run() { # run NAME ENV-CMD HOTSPOTD-EXTRA...
	local name=$1 envcmd=$2; shift 2
	(
		eval "$envcmd"
		id=trustbench-$name-$(date +%s)
		$bin/hotspotd --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --http-addr 127.0.0.1:27070 \
			--zk-root /$id --group $id --topic $id --id $id "$@" >/tmp/$id.log 2>&1 &
		pid=$!
		for _ in $(seq 100); do curl -skf ${HOTSPOT_TLS_CA:+--cacert $HOTSPOT_TLS_CA} "$( [[ -n ${HOTSPOT_TLS_CA:-} ]] && echo https || echo http )://127.0.0.1:27070/readyz" >/dev/null && break; sleep 0.3; done
		echo "== $name"
		$bin/hotspot bench --hotspotd 127.0.0.1:27070 --zk "$HOTSPOT_ZK" --zk-root /$id --topic $id --brokers "$HOTSPOT_KAFKA" "${flags[@]}" || true
		kill $pid; wait $pid || true
	)
}
run plain 'eval "$(HOTSPOT_STACK_DIR=${PLAIN_STACK_DIR:-.stack} deployments/local/stack.sh env)"'
run secure 'eval "$(deployments/local/stack.sh env --secure)"' \
	--tls-cert "$(dirname "$(deployments/local/stack.sh env --secure | sed -n 's/^export HOTSPOT_TLS_CA=//p')")/server.pem" \
	--tls-key "$(dirname "$(deployments/local/stack.sh env --secure | sed -n 's/^export HOTSPOT_TLS_CA=//p')")/server.key"
