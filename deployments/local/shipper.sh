#!/usr/bin/env bash
# shipper.sh up --topic T [--brokers ADDR] [--port P] [--partitions N] | down | status | env:
# a real log shipper on 127.0.0.1 for the tests: Debian's nginx writes its
# access log in the combined format, Debian's rsyslog (imfile, omkafka) ships
# each line to a Kafka topic, as a site would feed hotspotd.
#
# `up` installs what is missing (Debian's nginx, rsyslog, rsyslog-kafka and
# kcat, with apt-get, through sudo when not root), creates topic T if it is
# missing (N partitions, 2 by default; an existing topic is left as it is),
# then starts, as the current user:
#   - an nginx master with its own configuration, listening on 127.0.0.1:P
#     (18080, or HOTSPOT_SHIPPER_PORT): GET /item/<anything> answers "item\n",
#     GET /healthz an empty 200, / a static index. Every request is written at
#     once (no buffer) to the access log in nginx's combined format, except
#     /shipper-ready, this script's own readiness check;
#   - an rsyslogd with its own configuration and work directory (no system
#     input such as imuxsock or imklog, nothing read or written in /etc or
#     /var/log): imfile follows the access log from its first line (inotify),
#     omkafka sends each line as it is (no syslog header, no newline, control
#     characters and UTF-8 untouched) to topic T on ADDR (HOTSPOT_KAFKA, else
#     the local stack's 127.0.0.1:19092), keyless and so spread over the
#     partitions, batching for 5 ms at most. Lines up to 64 KiB go whole; a
#     longer one is cut to 64 KiB (nginx's own lines stay far below that).
#     omkafka stamps each record with the second rsyslog read the line
#     (whole seconds), so the topic is created with
#     message.timestamp.type=LogAppendTime: the broker's append time, in
#     milliseconds, is the record's timestamp (docs/ingest.md, "Time").
# It returns once nginx answers and a probe line went the whole way: it
# requests /healthz?shipper-probe=<nanoseconds> and reads that line back from
# the topic with kcat (20 s at most, HOTSPOT_SHIPPER_WAIT). That probe is the
# only line `up` adds to the topic: a test that counts lines skips those
# containing "shipper-probe".
#
# A start from stopped empties the access log and rsyslog's work directory,
# so the topic gets exactly the lines requested from then on. `up` is
# idempotent: while both run with the same settings it only checks them; if
# one of the two died, it starts that one again (rsyslog goes on from the
# offset it saved when it stopped; after a SIGKILL it saved none and ships
# again the lines since its start); with another topic, brokers or port, or a
# changed shipper.sh, it stops both and starts afresh. `down` stops both
# (SIGTERM, then SIGKILL after 10 s); rsyslog sends what it holds first.
# `status` says whether both run and nginx answers. `env` prints
# HOTSPOT_SHIPPER_URL, HOTSPOT_SHIPPER_LOG and, once started,
# HOTSPOT_SHIPPER_TOPIC.
#
# Everything (configurations, access log, logs, rsyslog's state, pid files)
# lives in $HOTSPOT_SHIPPER_DIR, by default the stack's state folder's
# shipper/ ($HOTSPOT_STACK_DIR/shipper, .stack/shipper at the top of the
# repository). nginx's errors are in nginx/error.log there; rsyslogd's own
# messages in rsyslog/rsyslogd.log, and the lines Kafka refused in
# rsyslog/omkafka-errors.json.
#
# The topic is created by deployments/local/mktopic (the project's own
# kafkaio.EnsureTopicConfig), built into $HOTSPOT_SHIPPER_DIR/bin: the stack's
# Kafka jars carry no topic tool, and kcat cannot create topics.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
state=${HOTSPOT_SHIPPER_DIR:-${HOTSPOT_STACK_DIR:-$top/.stack}/shipper}
PATH=$PATH:/usr/sbin:/sbin # nginx and rsyslogd, for a user whose PATH lacks them

log() { printf 'shipper: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

runs() { # runs PID: PID is a live process (not a zombie that init has yet to reap) of this shipper
	local st
	kill -0 "$1" 2>/dev/null && st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ $st != Z* ]] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$state/"
}

alive() { # alive NAME: the process in $state/NAME.pid runs
	local f=$state/$1.pid
	[[ -f $f ]] && runs "$(cat "$f")"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

omkafka_installed() { compgen -G '/usr/lib/*/rsyslog/omkafka.so' >/dev/null || [[ -f /usr/lib/rsyslog/omkafka.so ]]; }

install_debs() {
	local missing=()
	command -v nginx >/dev/null || missing+=(nginx)
	command -v rsyslogd >/dev/null || missing+=(rsyslog)
	omkafka_installed || missing+=(rsyslog-kafka)
	command -v kcat >/dev/null || missing+=(kcat)
	((${#missing[@]} == 0)) && return
	log "installing ${missing[*]} from Debian's packages"
	local sudo=""
	((EUID == 0)) || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	omkafka_installed || die "rsyslog-kafka is installed but omkafka.so is not where rsyslog looks for modules"
}

# The topic: created by deployments/local/mktopic (kafkaio.EnsureTopicConfig),
# built once into $state/bin; it waits until every partition is served.
ensure_topic() { # ensure_topic: create $topic with $partitions partitions unless it exists
	local bin=$state/bin/mktopic n
	mkdir -p "$state/bin"
	command -v go >/dev/null || die "Go is needed to build the topic tool (deployments/local/mktopic)"
	(cd "$top" && go build -o "$bin" ./deployments/local/mktopic) || die "could not build $bin"
	n=$("$bin" "$brokers" "$topic" "$partitions") || die "could not create topic $topic on $brokers"
	[[ -z $partitions_given || $n == "$partitions" ]] || log "topic $topic exists with $n partitions (not $partitions); left as it is"
}

write_nginx_conf() {
	local dir=$state/nginx user=""
	mkdir -p "$dir/html" "$dir/tmp"
	# As root the master hands its workers to the current user (root), so
	# that they can read the index wherever the repository is.
	((EUID == 0)) && user="user $(id -un) $(id -gn);"
	cat >"$dir/html/index.html" <<'EOF'
<!doctype html>
<title>hotspot shipper</title>
<p>A test site: <a href="/item/1">/item/1</a>, <a href="/healthz">/healthz</a>.</p>
EOF
	cat >"$dir/nginx.conf" <<EOF
# Written by deployments/local/shipper.sh; run with -p $dir/ -c $dir/nginx.conf
$user
worker_processes 1;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
	types { text/html html; }
	default_type text/plain;
	client_body_temp_path $dir/tmp/body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	access_log $state/access.log combined;
	server_tokens off;
	keepalive_timeout 30s;
	server {
		listen 127.0.0.1:$port;
		server_name localhost;
		root $dir/html;
		index index.html;
		location /item/ { return 200 "item\n"; }
		location = /healthz { return 200; }
		# The script's own checks, kept out of the log (and so the topic).
		location = /shipper-ready { access_log off; return 200; }
	}
}
EOF
}

start_nginx() {
	alive nginx && return
	port_open "$port" && die "port $port is taken by a process this script did not start (use --port or HOTSPOT_SHIPPER_PORT)"
	write_nginx_conf
	local dir=$state/nginx
	nginx -t -q -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" -g "pid $state/nginx.pid;" 2>"$dir/start.log" ||
		die "nginx refuses its configuration; see $dir/start.log"
	log "starting nginx on 127.0.0.1:$port"
	# nginx forks its master into the background and writes its pid file.
	nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" -g "pid $state/nginx.pid;" 2>"$dir/start.log" ||
		die "nginx did not start; see $dir/start.log"
}

write_rsyslog_conf() {
	local dir=$state/rsyslog b list=""
	mkdir -p "$dir/work"
	for b in ${brokers//,/ }; do list+="${list:+, }\"$b\""; done
	cat >"$dir/rsyslog.conf" <<EOF
# Written by deployments/local/shipper.sh; run as rsyslogd -n -f $dir/rsyslog.conf -i $dir/rsyslogd.pid
# No system inputs (imuxsock, imklog, imjournal): only the access log.
global(
	workDirectory="$dir/work"
	maxMessageSize="64k"
	processInternalMessages="on"
	parser.escapeControlCharactersOnReceive="off"
	net.enableDNS="off"
)
module(load="imfile" mode="inotify")
module(load="omkafka")

# The line as nginx wrote it: no syslog header, no newline.
template(name="shipper_line" type="string" string="%msg%")

ruleset(name="shipper") {
	action(type="omkafka" name="shipper_kafka"
		broker=[$list]
		topic="$topic"
		template="shipper_line"
		partitions.auto="on"
		confParam=["queue.buffering.max.ms=5", "socket.nagle.disable=true", "message.max.bytes=1000000"]
		topicConfParam=["request.required.acks=1"]
		errorFile="$dir/omkafka-errors.json"
		resubmitOnFailure="on"
		keepFailedMessages="on"
		failedMsgFile="$dir/work/omkafka-failed.data"
		closeTimeout="5000"
		action.resumeRetryCount="-1"
	)
}

input(type="imfile" file="$state/access.log" tag="nginx-access" ruleset="shipper"
	freshStartTail="off" reopenOnTruncate="on" addMetadata="off")

# rsyslogd's own messages, omkafka's errors among them.
action(type="omfile" file="$dir/rsyslogd.log")
EOF
}

start_rsyslog() {
	alive rsyslog && return
	write_rsyslog_conf
	local dir=$state/rsyslog
	rsyslogd -N1 -f "$dir/rsyslog.conf" >"$dir/check.log" 2>&1 ||
		die "rsyslogd refuses its configuration; see $dir/check.log"
	log "starting rsyslogd shipping $state/access.log to topic $topic on $brokers"
	nohup rsyslogd -n -f "$dir/rsyslog.conf" -i "$dir/rsyslogd.pid" >>"$dir/rsyslogd.log" 2>&1 </dev/null &
	echo $! >"$state/rsyslog.pid"
}

http_status() { # http_status PATH: the status nginx answers for PATH, or nothing
	# shellcheck disable=SC2016 # the inner shell expands them
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" &&
		printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: shipper.sh\r\n\r\n" "$2" >&3 &&
		read -r _ code _ <&3 && echo "$code"' _ "$port" "$1" 2>/dev/null || true
}

wait_up() { # wait_up: nginx answers, and a probe line comes back from the topic
	local deadline=$((SECONDS + ${HOTSPOT_SHIPPER_WAIT:-20})) marker
	until [[ $(http_status /shipper-ready) == 200 ]]; do
		alive nginx || die "nginx exited at start; see $state/nginx/error.log"
		((SECONDS < deadline)) || die "nginx does not answer on 127.0.0.1:$port; see $state/nginx/error.log"
		sleep 0.1
	done
	marker="/healthz?shipper-probe=$(date +%s%N)"
	[[ $(http_status "$marker") == 200 ]] || die "nginx did not answer $marker"
	# The last 1000 lines of each partition: the probe is among them unless
	# something else floods the topic meanwhile.
	until timeout 5 kcat -C -b "$brokers" -t "$topic" -o -1000 -e -q -f '%s\n' 2>/dev/null | grep -qF "$marker"; do
		alive rsyslog || die "rsyslogd exited at start; see $state/rsyslog/rsyslogd.log"
		((SECONDS < deadline)) || die "the probe line did not reach topic $topic in time; see $state/rsyslog/rsyslogd.log"
		sleep 0.2
	done
}

stop_one() { # stop_one NAME: stop the process this script started, if it runs
	local name=$1 pid
	alive "$name" || { rm -f "$state/$name.pid"; return 0; }
	pid=$(cat "$state/$name.pid")
	log "stopping $name (pid $pid)"
	kill "$pid"
	for _ in $(seq 50); do runs "$pid" || break; sleep 0.2; done
	runs "$pid" && kill -9 "$pid"
	rm -f "$state/$name.pid"
}

down() {
	stop_one rsyslog
	stop_one nginx
}

settings() { # the running shipper's settings; a changed script counts as other settings
	printf 'topic=%q\nbrokers=%q\nport=%q\nscript=%q\n' "$topic" "$brokers" "$port" "$(cksum <"${BASH_SOURCE[0]}")"
}

up() {
	[[ -n $topic ]] || die "up needs --topic T"
	[[ $topic =~ ^[A-Za-z0-9._-]{1,249}$ ]] || die "--topic: a Kafka topic name has only letters, digits, '.', '_' and '-'"
	[[ $port =~ ^[0-9]+$ ]] || die "--port must be a number"
	[[ $partitions =~ ^[1-9][0-9]*$ ]] || die "--partitions must be a number >= 1"
	mkdir -p "$state"
	install_debs
	if alive nginx || alive rsyslog; then
		if [[ $(settings) != "$(cat "$state/settings" 2>/dev/null)" ]]; then
			log "running with other settings ($(grep -v '^script=' "$state/settings" 2>/dev/null | tr '\n' ' ')or an older shipper.sh); starting afresh"
			down
		fi
	fi
	if ! alive nginx && ! alive rsyslog; then # afresh: an empty log, no state
		: >"$state/access.log"
		rm -rf "$state/rsyslog/work"
		rm -f "$state/rsyslog/rsyslogd.log"
	elif alive nginx && alive rsyslog; then
		[[ $(http_status /shipper-ready) == 200 ]] || die "nginx runs but does not answer on 127.0.0.1:$port; try \`$0 down\`"
		log "already up: nginx on 127.0.0.1:$port, rsyslog shipping $state/access.log to topic $topic"
		print_env
		return
	fi
	ensure_topic
	settings >"$state/settings"
	start_nginx
	start_rsyslog
	wait_up
	log "nginx on 127.0.0.1:$port, rsyslog shipping $state/access.log to topic $topic"
	print_env
}

print_env() {
	echo "export HOTSPOT_SHIPPER_URL=http://127.0.0.1:$port"
	echo "export HOTSPOT_SHIPPER_LOG=$state/access.log"
	[[ -z $topic ]] || echo "export HOTSPOT_SHIPPER_TOPIC=$topic"
}

status() {
	local name rc=0
	for name in nginx rsyslog; do
		if alive "$name"; then echo "$name: running (pid $(cat "$state/$name.pid"))"; else echo "$name: stopped"; rc=1; fi
	done
	if ((rc == 0)); then
		[[ $(http_status /shipper-ready) == 200 ]] && echo "nginx answers on 127.0.0.1:$port; shipping to topic $topic on $brokers" || rc=1
	fi
	return $rc
}

# Settings: the flags of `up`; otherwise those of the running shipper.
topic="" brokers="" port="" partitions=2 partitions_given=""
# shellcheck disable=SC1091 # written by settings()
[[ -f $state/settings ]] && . "$state/settings"
cmd=${1:-}
(($# > 0)) && shift
if [[ $cmd == up ]]; then
	topic="" brokers="" port=""
	while (($# > 0)); do
		case $1 in
		--topic) topic=${2:?--topic needs a value}; shift 2 ;;
		--brokers) brokers=${2:?--brokers needs a value}; shift 2 ;;
		--port) port=${2:?--port needs a value}; shift 2 ;;
		--partitions) partitions=${2:?--partitions needs a value} partitions_given=1; shift 2 ;;
		*) die "unknown flag $1 (up --topic T [--brokers ADDR] [--port P] [--partitions N])" ;;
		esac
	done
fi
brokers=${brokers:-${HOTSPOT_KAFKA:-127.0.0.1:${HOTSPOT_KAFKA_PORT:-19092}}}
port=${port:-${HOTSPOT_SHIPPER_PORT:-18080}}

case $cmd in
up) up ;;
down) down ;;
status) status ;;
env) print_env ;;
*) echo "usage: $0 up --topic T [--brokers ADDR] [--port P] [--partitions N] | down | status | env" >&2; exit 2 ;;
esac
