#!/usr/bin/env bash
# broker-cost.sh [-p PID | -j HOST:PORT] [-o FILE] -- COMMAND [ARG...]:
# what a Kafka broker served while COMMAND ran, per request type, from the
# broker's own metrics (issue 43; BENCHMARKS.md, "P8").
#
# It reads the broker's JMX counters (brokercost/BrokerJmx.java: by attaching
# to the broker's JVM with the JDK's attach API, so no JMX port is needed, or
# from HOST:PORT when the broker was started with one), runs COMMAND, reads
# them again and prints per second of that interval:
#   - per request type: requests/s, request bytes/s (the RequestBytes
#     histogram's sum: bytes in) and the request handler's local time (ms/s;
#     wall time, not CPU, so it depends on the machine's load);
#   - the listeners' bytes in and out on the wire (socket-server-metrics), the
#     record bytes in and out of all topics (BrokerTopicMetrics; the bytes out
#     are the fetch responses' records) and the records in;
#   - the broker's CPU-seconds over the interval (/proc/PID/stat, with -p or
#     the stack's pid; load-sensitive, unlike the counts).
# Fetch is the sum of FetchConsumer and FetchFollower, which are listed too.
# The counts cover every client of the broker: use a private stack
# (stack.sh's header) so that only the run's own traffic is counted.
#
# PID defaults to $HOTSPOT_STACK_DIR/kafka.pid (the stack of stack.sh).
# -l LOG also counts the requests by type and client id from the broker's
# request log (a broker started with HOTSPOT_KAFKA_REQUEST_LOG=1 writes it
# into $HOTSPOT_STACK_DIR/kafka.log), to say which client sends what.
# -o FILE also writes the table's rows as "type requests_per_s bytes_in_per_s
# local_ms_per_s" lines. `broker-cost.sh -p PID snap` prints one raw reading.
# Needs a JDK (javac): the tool is compiled once into a cache folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
state=${HOTSPOT_STACK_DIR:-$top/.stack}
pid="" jmx="" outfile="" reqlog=""
while (($#)); do
	case $1 in
	-p) pid=$2; shift 2 ;;
	-j) jmx=$2; shift 2 ;;
	-o) outfile=$2; shift 2 ;;
	-l) reqlog=$2; shift 2 ;;
	--) shift; break ;;
	snap) break ;;
	*) echo "usage: $0 [-p PID | -j HOST:PORT] [-o FILE] -- COMMAND [ARG...]" >&2; exit 2 ;;
	esac
done
(($#)) || { echo "usage: $0 [-p PID | -j HOST:PORT] [-o FILE] -- COMMAND [ARG...]" >&2; exit 2; }
if [[ -z $pid && -z $jmx ]]; then
	[[ -f $state/kafka.pid ]] || { echo "broker-cost: no $state/kafka.pid; give -p PID or -j HOST:PORT" >&2; exit 1; }
	pid=$(cat "$state/kafka.pid")
fi

cache=${TMPDIR:-/tmp}/hotspot-brokercost
src=$here/brokercost/BrokerJmx.java
if [[ ! -f $cache/BrokerJmx.class || $src -nt $cache/BrokerJmx.class ]]; then
	mkdir -p "$cache"
	javac -d "$cache" "$src"
fi
read_jmx() { java -cp "$cache" BrokerJmx "${jmx:-$pid}"; }
cpu_ticks() { [[ -n $pid ]] && awk '{print $14 + $15}' "/proc/$pid/stat" || echo -1; }
now() { date +%s.%N; }

if [[ $1 == snap ]]; then
	read_jmx
	exit 0
fi

work=$(mktemp -d /tmp/broker-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
read_jmx >"$work/before"
[[ -z $reqlog ]] || l0=$(stat -c %s "$reqlog")
t0=$(now) c0=$(cpu_ticks)
rc=0
"$@" || rc=$?
t1=$(now) c1=$(cpu_ticks)
[[ -z $reqlog ]] || tail -c +"$((l0 + 1))" "$reqlog" >"$work/reqlog"
read_jmx >"$work/after"
hz=$(getconf CLK_TCK)

awk -v secs="$(echo "$t1 - $t0" | bc)" -v cpu0="$c0" -v cpu1="$c1" -v hz="$hz" -v out="$outfile" '
	{ k = NF == 3 ? $1 " " $2 : $1 }
	FNR == NR { before[k] = $NF; next }
	{ d = $NF - before[k] }
	$1 == "requests" && d > 0 { req[$2] = d; types[$2] = 1 }
	$1 == "request_bytes" && d > 0 { rb[$2] = d }
	$1 == "local_ms" && d > 0 { lm[$2] = d }
	NF == 2 { tot[$1] = d }
	END {
		n = 0
		for (t in types) names[++n] = t
		# order by requests, most first
		for (i = 2; i <= n; i++) for (j = i; j > 1 && req[names[j]] > req[names[j-1]]; j--) { x = names[j]; names[j] = names[j-1]; names[j-1] = x }
		printf "broker over %.1f s\n", secs
		printf "%-28s %12s %14s %12s\n", "request type", "requests/s", "bytes in/s", "local ms/s"
		for (i = 1; i <= n; i++) {
			t = names[i]
			printf "%-28s %12.1f %14.0f %12.1f\n", t, req[t] / secs, rb[t] / secs, lm[t] / secs
			if (t != "FetchConsumer" && t != "FetchFollower") { sr += req[t]; sb += rb[t]; sl += lm[t] }
			if (out != "") printf "%s %.2f %.0f %.2f\n", t, req[t] / secs, rb[t] / secs, lm[t] / secs > out
		}
		printf "%-28s %12.1f %14.0f %12.1f\n", "all (Fetch counted once)", sr / secs, sb / secs, sl / secs
		printf "wire bytes in/s %.0f, out/s %.0f; topic record bytes in/s %.0f, out/s %.0f; records in/s %.0f\n",
			tot["net_in"] / secs, tot["net_out"] / secs, tot["topic_in"] / secs, tot["topic_out"] / secs, tot["messages_in"] / secs
		if (cpu0 >= 0) printf "broker CPU-seconds %.2f (load-sensitive)\n", (cpu1 - cpu0) / hz
	}' "$work/before" "$work/after"
if [[ -n $reqlog ]]; then
	printf '\nby client (request log): %-24s %-36s %10s\n' "request type" "client id" "requests/s"
	grep -o '"clientId":"[^"]*","requestApiKeyName":"[^"]*"' "$work/reqlog" |
		sed 's/"clientId":"\([^"]*\)","requestApiKeyName":"\([^"]*\)"/\2 \1/' | sort | uniq -c | sort -rn |
		awk -v secs="$(echo "$t1 - $t0" | bc)" '{ printf "%-24s %-36s %10.2f\n", $2, ($3 == "" ? "(none)" : $3), $1 / secs }'
fi
exit "$rc"
