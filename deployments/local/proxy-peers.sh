#!/usr/bin/env bash
# proxy-peers.sh TARGET...: alternated rounds of redis-benchmark in front of
# the local stack's one Redis, through each TARGET in turn, so that proxies
# are compared in the same run on the same machine (BENCHMARKS.md X1, X4).
#
# TARGET is one of
#   direct               Redis itself
#   hotspot=BIN          a hotspot-proxy binary (e.g. one built from an older
#                        commit: git worktree add /tmp/old REV && go build -C
#                        /tmp/old -o /tmp/hotspot-proxy.old ./cmd/hotspot-proxy),
#                        with hotspotd on the stack reporting its accesses
#   hotspot-shared=BIN   the same with --upstream shared (docs/proxy.md)
#   twemproxy            Debian's nutcracker (installed when missing)
#   camellia=JAR         NetEase camellia-redis-proxy's bootstrap jar, built by
#                        deployments/local/camellia-proxy.sh, with its hot-key
#                        cache plugin on for every key (its defaults: 100 GETs
#                        in 1 s make a key hot, cached 10 s); run by $JAVA
#                        (default: a JDK of 21 or later under /usr/lib/jvm)
#   floor=MODEL          deployments/local/respfloor, a server that answers
#                        every command at once without Redis: the floor of
#                        the I/O model MODEL (goroutines, as hotspot-proxy's
#                        sessions; gnet, an event loop); its hot-key runs are
#                        its cold ones again
#
# Each round runs, per target: cold GET and SET at -P 1 (-n N1) and -P 16
# (-n N16), -c 50 -r 100000; then one hot key (promoted by the proxy first)
# GET at -P 1 and -P 16. It prints requests/s, the proxy's CPU per request
# (its utime+stime from /proc) and Redis' CPU per request, and Redis' GETs
# during the hot-key runs.
# Env: ROUNDS (3), N1 (200000), N16 (1000000). Run on a quiet machine.
set -euo pipefail
# newjdk prints the first JDK of 21 or later under /usr/lib/jvm.
newjdk() { for d in /usr/lib/jvm/*-2[1-9]* /usr/lib/jvm/*-[3-9][0-9]*; do [[ -x $d/bin/java ]] && { echo "$d"; return; }; done; }
cd "$(dirname "$0")/../.."
(($#)) || { sed -n '2,30p' "$0" >&2; exit 2; }
eval "$(deployments/local/stack.sh env)"
rounds=${ROUNDS:-3} n1=${N1:-200000} n16=${N16:-1000000}
id=peers$$
rhost=${HOTSPOT_REDIS%:*} rport=${HOTSPOT_REDIS##*:}
rpid=$(redis-cli -h "$rhost" -p "$rport" info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
log=${HOTSPOT_STACK_DIR:-.stack}/$id
mkdir -p "$log" bin
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
gets() { redis-cli -h "$rhost" -p "$rport" info commandstats | sed -n 's/^cmdstat_get:calls=\([0-9]*\),.*/\1/p'; }
wait_port() { for _ in $(seq 300); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done; echo "nothing answers on $1" >&2; exit 1; }

names=() ports=() procs=() hot=()
port=26500
for t in "$@"; do
	case $t in
	direct)
		names+=(direct) ports+=("$rport") procs+=("") hot+=("") ;;
	hotspot=* | hotspot-shared=*)
		bin=${t#*=} mode=dedicated
		[[ $t == hotspot-shared=* ]] && mode=shared
		if [[ -z ${hotspotd:-} ]]; then
			go build -o bin/hotspotd ./cmd/hotspotd
			bin/hotspotd --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" --group "$id" \
				--http-addr 127.0.0.1:27073 --redis "" --threshold 1000 >"$log/hotspotd.log" 2>&1 &
			hotspotd=$!
			pids+=("$hotspotd")
		fi
		"$bin" --app "$id$port" --brokers "$HOTSPOT_KAFKA" --zk "$HOTSPOT_ZK" --zk-root "/$id" --topic "$id" \
			--redis "$HOTSPOT_REDIS" --listen "127.0.0.1:$port" --http "127.0.0.1:$((port + 1))" \
			$([[ $mode == shared ]] && echo --upstream shared) >"$log/proxy$port.log" 2>&1 &
		pids+=($!)
		names+=("hotspot-$mode($bin)") ports+=("$port") procs+=($!) hot+=(1)
		port=$((port + 2)) ;;
	twemproxy)
		command -v nutcracker >/dev/null || { s=$([ "$(id -u)" = 0 ] || echo sudo); $s apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive $s apt-get install -y -qq --no-install-recommends nutcracker >/dev/null; }
		cat >"$log/nutcracker.yml" <<-EOF
			peers:
			  listen: 127.0.0.1:$port
			  redis: true
			  servers:
			   - $HOTSPOT_REDIS:1
		EOF
		nutcracker -c "$log/nutcracker.yml" -s $((port + 1)) -o "$log/nutcracker.log" &
		pids+=($!)
		names+=(twemproxy) ports+=("$port") procs+=($!) hot+=("")
		port=$((port + 2)) ;;
	camellia=*)
		java=${JAVA:-$(newjdk)/bin/java}
		cat >"$log/camellia.properties" <<-EOF
			port=$port
			route.conf=redis://@$HOTSPOT_REDIS
			proxy.plugin.list=hotKeyCachePlugin
			hot.key.cache.key.prefix=[""]
		EOF
		"$java" -Xms512m -Xmx512m -Ddynamic.conf.file.path="$PWD/$log/camellia.properties" -jar "${t#camellia=}" \
			--server.port=$((port + 1)) >"$log/camellia.log" 2>&1 &
		pids+=($!)
		names+=(camellia) ports+=("$port") procs+=($!) hot+=("")
		port=$((port + 2)) ;;
	floor=*)
		go build -C deployments/local/respfloor -o "$PWD/bin/respfloor" .
		bin/respfloor -listen "127.0.0.1:$port" -loop "${t#floor=}" >"$log/floor$port.log" 2>&1 &
		pids+=($!)
		names+=("$t") ports+=("$port") procs+=($!) hot+=("")
		port=$((port + 2)) ;;
	*) echo "unknown target $t" >&2; exit 2 ;;
	esac
done
for p in "${ports[@]}"; do wait_port "$p"; done
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(redis-server --version | cut -d' ' -f3)"

# bench LABEL PORT PROC ARGS...: one redis-benchmark run, with the proxy's
# and Redis' CPU per request.
bench() {
	local label=$1 p=$2 proc=$3
	shift 3
	local c0 r0 out
	c0=$([[ -n $proc ]] && cpu "$proc" || echo 0) r0=$(cpu "$rpid")
	out=$(redis-benchmark -p "$p" -c 50 -q "$@" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' || true)
	local c1 r1
	c1=$([[ -n $proc ]] && cpu "$proc" || echo 0) r1=$(cpu "$rpid")
	echo "$out" | awk -v l="$label" -v c=$((c1 - c0)) -v r=$((r1 - r0)) -v hz="$hz" -v args="$*" '
		{ n++; name[n] = $1; sub(/:$/, "", name[n]); match($0, /[0-9.]+ requests per second/); rps[n] = substr($0, RSTART, RLENGTH) + 0 }
		END {
			# requests: -n per test, from args
			m = split(args, a, " "); req = 0; tests = n
			for (i = 1; i <= m; i++) if (a[i] == "-n") req = a[i+1]
			line = sprintf("%-32s %-28s", l, args)
			for (i = 1; i <= n; i++) line = line sprintf(" %s %.1fk", name[i], rps[i] / 1000)
			tot = req * tests
			if (tot > 0) line = line sprintf(" | proxy %.2f us/req, redis %.2f us/req", c / hz / tot * 1e6, r / hz / tot * 1e6)
			print line
		}'
}

# promote I: make the hot key hot through target I (a hotspot proxy), and
# wait until the proxy lists it.
promote() {
	[[ -n ${hot[$1]} ]] || return 0
	redis-benchmark -p "${ports[$1]}" -n 30000 -c 50 -q GET "$id:hot" >/dev/null
	for _ in $(seq 50); do [[ -n $(redis-cli -p "${ports[$1]}" hotspot keys) ]] && return; sleep 0.1; done
	echo "   the hot key was not promoted through ${names[$1]}"
}
redis-cli -h "$rhost" -p "$rport" set "$id:hot" v >/dev/null
# A warm-up of every target (a JVM compiles its hot paths in the first seconds).
for i in "${!ports[@]}"; do
	redis-benchmark -p "${ports[$i]}" -c 50 -q -t get,set -r 100000 -P 16 -n 300000 >/dev/null 2>&1
	redis-benchmark -p "${ports[$i]}" -c 50 -q -t get,set -r 100000 -n 50000 >/dev/null 2>&1
done
for r in $(seq "$rounds"); do
	echo "== round $r ($(uptime | sed 's/.*load/load/'))"
	for i in "${!ports[@]}"; do
		bench "${names[$i]}" "${ports[$i]}" "${procs[$i]}" -t get,set -r 100000 -P 1 -n "$n1"
		bench "${names[$i]}" "${ports[$i]}" "${procs[$i]}" -t get,set -r 100000 -P 16 -n "$n16"
	done
	for i in "${!ports[@]}"; do
		promote "$i"
		g0=$(gets)
		bench "${names[$i]}" "${ports[$i]}" "${procs[$i]}" -n "$n1" -P 1 GET "$id:hot"
		bench "${names[$i]}" "${ports[$i]}" "${procs[$i]}" -n "$n16" -P 16 GET "$id:hot"
		echo "   Redis GETs during the hot key's runs: $(($(gets) - g0))"
	done
done
redis-cli -h "$rhost" -p "$rport" del "$id:hot" >/dev/null
