#!/usr/bin/env bash
# stack.sh up|down|status|env|install [--secure|--cluster]: a real Kafka (KRaft), ZooKeeper and Redis on 127.0.0.1.
# --secure runs the secured stack instead (TLS, SASL, ZooKeeper and Redis auth; secure.sh);
# --cluster the clustered one (3 Kafka brokers, replication factor 3, a 3-server ZooKeeper ensemble and
# 2 observers; cluster.sh).
# stack.sh up|down|status|env|purge --redis-cluster|--redis-sentinel, and start|stop|kill MEMBER with either:
# a Redis Cluster (3 masters, 3 replicas, ports 17001-17006) or a Redis primary, replica and 3 sentinels
# (17101, 17102, 17201-17203), beside the stack (redis.sh).
#
# On a fresh Debian machine `up` installs what is missing (Debian's zookeeper,
# redis-server, openjdk-17-jre-headless and maven packages; Apache Kafka and
# its dependencies from Maven Central) and starts the three services bound to
# loopback, waiting until each answers a real request. `install` installs and
# fetches without starting anything. It is idempotent: a service it already
# started is left alone.
# `down` stops only the processes this script started (by their pid files).
#
# Everything it keeps (downloads, data, logs, pid files) lives in one folder,
# $HOTSPOT_STACK_DIR, by default .stack/ at the top of the repository.
#
# Ports: HOTSPOT_KAFKA_PORT (19092), HOTSPOT_KAFKA_CONTROLLER_PORT (19093),
# HOTSPOT_ZK_PORT (12181), HOTSPOT_REDIS_PORT (16379). The defaults are not the
# services' usual ports so the stack never collides with a system-wide install.
#
# HOTSPOT_KAFKA_VERSION (4.4.0) picks the Apache Kafka release, any 4.x on
# Maven Central, to test against the broker you run. Each version is fetched
# once into its own folder; a running broker of another version is left
# running until `down`. Each version keeps its own data folder, so that a
# switch never hands one version's log to another (Kafka cannot downgrade).
#
# A second, private stack (the fault tests restart its broker and ZooKeeper)
# takes its own HOTSPOT_STACK_DIR and ports, and HOTSPOT_KAFKA_LIBS, the libs/
# folder of an already downloaded Kafka (the shared stack's
# .stack/kafka-<version>/libs), so that nothing is fetched again; the version
# is then that of the jars there unless HOTSPOT_KAFKA_VERSION says otherwise.
# HOTSPOT_KAFKA_JVM_FLAGS replaces the broker's garbage-collector flags and
# HOTSPOT_KAFKA_SETTINGS adds server.properties lines (newline-separated),
# to measure the broker's CPU under other settings (BENCHMARKS.md records
# which were used). HOTSPOT_KAFKA_REQUEST_LOG=1 logs every request the broker
# completes, with its client id, into kafka.log (broker-cost.sh -l).
# `start SERVICE...` and `stop SERVICE...` (zookeeper, redis, kafka) start or
# stop single services of a stack, without installing or probing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
state=${HOTSPOT_STACK_DIR:-$top/.stack}
kafka_libs=${HOTSPOT_KAFKA_LIBS:-}
kafka_version=${HOTSPOT_KAFKA_VERSION:-}
if [[ -z $kafka_version && -n $kafka_libs ]]; then # the version of the jars given
	for jar in "$kafka_libs"/kafka_2.13-[0-9]*.jar; do
		[[ -f $jar ]] && kafka_version=${jar##*/kafka_2.13-} && kafka_version=${kafka_version%.jar}
	done
fi
kafka_version=${kafka_version:-4.4.0}
kafka_port=${HOTSPOT_KAFKA_PORT:-19092}
kafka_ctl_port=${HOTSPOT_KAFKA_CONTROLLER_PORT:-19093}
zk_port=${HOTSPOT_ZK_PORT:-12181}
redis_port=${HOTSPOT_REDIS_PORT:-16379}
partitions=${HOTSPOT_KAFKA_PARTITIONS:-8}
kafka_libs=${kafka_libs:-$state/kafka-$kafka_version/libs}

log() { printf 'stack: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

alive() { # alive NAME [DIR]: the process in DIR/NAME.pid runs (DIR: $state)
	local f=${2:-$state}/$1.pid
	[[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

install_debs() {
	local missing=()
	command -v redis-server >/dev/null || missing+=(redis-server)
	[[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
	command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
	command -v mvn >/dev/null || missing+=(maven) # fetches Apache Kafka from Maven Central
	((${#missing[@]} == 0)) && return
	log "installing ${missing[*]} from Debian's packages"
	local sudo=""
	((EUID == 0)) || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_kafka() {
	local libs=$kafka_libs
	[[ -f $libs/kafka_2.13-$kafka_version.jar ]] && return
	command -v mvn >/dev/null || die "Maven is needed to fetch Apache Kafka from Maven Central, and installing Debian's maven did not provide it"
	log "fetching Apache Kafka $kafka_version from Maven Central"
	mkdir -p "$libs.tmp"
	# Debian's Maven 3.8 writes colour resets (ESC[0m) even with -B and
	# style.color=never: its output goes to a log, shown without escapes
	# only when the fetch fails.
	local out=$state/maven.log
	mkdir -p "$state"
	if ! mvn -q -B -Dstyle.color=never -f "$here/kafka-pom.xml" -Dkafka.version="$kafka_version" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs.tmp" >"$out" 2>&1; then
		sed 's/\x1b\[[0-9;]*m//g' "$out" >&2
		die "could not fetch org.apache.kafka:kafka_2.13:$kafka_version from Maven Central"
	fi
	mv "$libs.tmp" "$libs"
}

start_zookeeper() {
	alive zookeeper && return
	port_open "$zk_port" && die "port $zk_port is taken by a process this script did not start (set HOTSPOT_ZK_PORT)"
	local dir=$state/zookeeper
	mkdir -p "$dir/data"
	cat >"$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
maxClientCnxns=0
maxSessionTimeout=60000
minSessionTimeout=1000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr,cons
EOF
	log "starting ZooKeeper on 127.0.0.1:$zk_port"
	launch_zookeeper "$dir" "$state"
}

launch_zookeeper() { # launch_zookeeper DIR STATE: run the ZooKeeper of DIR/zoo.cfg, its pid and log in STATE
	local dir=$1 st=$2
	cat >"$dir/log4j.properties" <<'EOF'
log4j.rootLogger=WARN, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
EOF
	nohup java -Xms64m -Xmx256m -Dzookeeper.jmx.log4j.disable=true \
		-Dlog4j.configuration="file:$dir/log4j.properties" \
		-cp "$dir:/usr/share/java/zookeeper.jar" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
		>"$st/zookeeper.log" 2>&1 </dev/null &
	echo $! >"$st/zookeeper.pid"
}

start_redis() {
	alive redis && return
	port_open "$redis_port" && die "port $redis_port is taken by a process this script did not start (set HOTSPOT_REDIS_PORT)"
	log "starting Redis on 127.0.0.1:$redis_port"
	mkdir -p "$state/redis"
	nohup redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
		--dir "$state/redis" --protected-mode yes --maxclients 20000 \
		>"$state/redis.log" 2>&1 </dev/null &
	echo $! >"$state/redis.pid"
}

kafka_java() {
	java -cp "$kafka_libs/*" "$@"
}

start_kafka() {
	if alive kafka; then
		local running
		running=$(cat "$state/kafka.version" 2>/dev/null || echo "of an unrecorded version")
		[[ $running == "$kafka_version" ]] ||
			log "Apache Kafka $running is running; HOTSPOT_KAFKA_VERSION=$kafka_version takes effect after \`$0 down\`"
		return
	fi
	port_open "$kafka_port" && die "port $kafka_port is taken by a process this script did not start (set HOTSPOT_KAFKA_PORT)"
	local dir=$state/kafka
	mkdir -p "$dir"
	cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$kafka_ctl_port
listeners=PLAINTEXT://127.0.0.1:$kafka_port,CONTROLLER://127.0.0.1:$kafka_ctl_port
advertised.listeners=PLAINTEXT://127.0.0.1:$kafka_port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
$(kafka_broker_settings "$dir")
EOF
	kafka_log4j "$dir"
	if [[ ! -f $dir/data-$kafka_version/meta.properties ]]; then
		log "formatting Kafka storage (KRaft)"
		format_kafka "$dir" "$state"
	fi
	log "starting Apache Kafka $kafka_version (KRaft) on 127.0.0.1:$kafka_port"
	launch_kafka "$dir" "$state"
	echo "$kafka_version" >"$state/kafka.version"
}

kafka_log4j() { # kafka_log4j DIR: the log4j2 settings of a local broker, in DIR/log4j2.yaml
	cat >"$1/log4j2.yaml" <<'EOF'
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
EOF
	# Every request the broker completes, with its client id, into kafka.log
	# (broker-cost.sh -l reads it; costly, for attributing requests only).
	[[ ${HOTSPOT_KAFKA_REQUEST_LOG:-} != 1 ]] || cat >>"$1/log4j2.yaml" <<'EOF'
      - name: kafka.request.logger
        level: DEBUG
EOF
}

kafka_broker_settings() { # kafka_broker_settings DIR: the server.properties lines every local broker shares
	local dir=$1
	cat <<EOF
log.dirs=$dir/data-$kafka_version
num.partitions=$partitions
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=2
log.segment.bytes=67108864
EOF
	[[ -z ${HOTSPOT_KAFKA_SETTINGS:-} ]] || printf '%s\n' "$HOTSPOT_KAFKA_SETTINGS"
}

format_kafka() { # format_kafka DIR STATE [ARG...]: format DIR's KRaft storage (cluster id $KAFKA_CLUSTER_ID, else a new one); ARGs go to StorageTool format
	local dir=$1 st=$2 id=${KAFKA_CLUSTER_ID:-}
	shift 2
	[[ -n $id ]] || id=$(kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
	kafka_java -Dlog4j2.configurationFile="$dir/log4j2.yaml" kafka.tools.StorageTool format \
		-t "$id" -c "$dir/server.properties" "$@" >"$st/kafka-format.log" 2>&1 ||
		die "formatting Kafka storage failed; see $st/kafka-format.log"
}

launch_kafka() { # launch_kafka DIR STATE: run the broker of DIR/server.properties, its pid and log in STATE
	local dir=$1 st=$2
	KAFKA_HEAP=${HOTSPOT_KAFKA_HEAP:-512m}
	# shellcheck disable=SC2086 # the flags are words
	nohup java -Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" ${HOTSPOT_KAFKA_JVM_FLAGS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20} \
		-Djava.awt.headless=true -Dlog4j2.configurationFile="$dir/log4j2.yaml" \
		-cp "$kafka_libs/*" kafka.Kafka "$dir/server.properties" \
		>"$st/kafka.log" 2>&1 </dev/null &
	echo $! >"$st/kafka.pid"
}

probe() { # probe: every service answers a real request (Go probe, see probe/main.go)
	(cd "$top" && go run ./deployments/local/probe -kafka "127.0.0.1:$kafka_port" \
		-zk "127.0.0.1:$zk_port" -redis "127.0.0.1:$redis_port" "$@")
}

print_env() {
	echo "export HOTSPOT_KAFKA=127.0.0.1:$kafka_port"
	echo "export HOTSPOT_ZK=127.0.0.1:$zk_port"
	echo "export HOTSPOT_REDIS=127.0.0.1:$redis_port"
}

up() {
	mkdir -p "$state"
	install_debs
	install_kafka
	start_zookeeper
	start_redis
	start_kafka
	for name in zookeeper redis kafka; do
		alive "$name" || die "$name exited at start; see $state/$name.log"
	done
	probe -wait 120s || die "the stack did not answer in time; logs are in $state"
	log "up; state and logs in $state"
	print_env
}

stop_one() { # stop_one NAME [DIR [LABEL]]: stop the service this script started in DIR ($state), if it runs
	local name=$1 dir=${2:-$state} label=${3:-$1} pid
	alive "$name" "$dir" || { rm -f "$dir/$name.pid"; return 0; }
	pid=$(cat "$dir/$name.pid")
	log "stopping $label (pid $pid)"
	kill "$pid"
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
	kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	rm -f "$dir/$name.pid"
}

down() {
	local name
	for name in kafka redis zookeeper; do
		stop_one "$name"
	done
}

services() { # services start|stop NAME...
	local verb=$1 name
	shift
	mkdir -p "$state"
	for name in "$@"; do
		case $name in
		zookeeper | redis | kafka) ;;
		*) die "unknown service $name (zookeeper, redis, kafka)" ;;
		esac
		if [[ $verb == start ]]; then "start_$name"; else stop_one "$name"; fi
	done
}

status() {
	local name rc=0
	for name in zookeeper redis kafka; do
		if alive "$name"; then echo "$name: running (pid $(cat "$state/$name.pid"))"; else echo "$name: stopped"; rc=1; fi
	done
	((rc == 0)) && probe -wait 5s >/dev/null && echo "all answer" || rc=1
	return $rc
}

# --cluster: the clustered stack instead (cluster.sh; docs/operations.md, "Clusters").
if [[ ${2:-} == --cluster || ${3:-} == --cluster ]]; then
	. "$here/cluster.sh"
	case ${1:-} in
	up) cluster_up ;;
	down) cluster_down ;;
	status) cluster_status ;;
	env) cluster_env ;;
	start | stop | kill) cluster_member "$1" "${2:-}" ;;
	purge) cluster_down; rm -rf "$cstate" ;;
	*) echo "usage: $0 up|down|status|env|purge --cluster, or $0 start|stop|kill MEMBER --cluster" >&2; exit 2 ;;
	esac
	exit
fi

# --redis-cluster, --redis-sentinel: a Redis Cluster, or a primary, a replica
# and three sentinels (redis.sh; docs/operations.md, "Redis Cluster and Sentinel").
for kind in cluster sentinel; do
	[[ ${2:-} == --redis-$kind || ${3:-} == --redis-$kind ]] || continue
	. "$here/redis.sh"
	case ${1:-} in
	up | down | status | env | purge) "r${kind}_$1" ;;
	start | stop | kill) "r${kind}_member" "$1" "${2:-}" ;;
	*) echo "usage: $0 up|down|status|env|purge --redis-$kind, or $0 start|stop|kill MEMBER --redis-$kind" >&2; exit 2 ;;
	esac
	exit
done

# --secure: the secured stack instead (secure.sh; docs/security.md).
if [[ ${2:-} == --secure ]]; then
	. "$here/secure.sh"
	case ${1:-} in
	up) secure_up ;;
	down) secure_down ;;
	status) secure_status ;;
	env) secure_env ;;
	purge) secure_down; rm -rf "$sstate" ;;
	*) echo "usage: $0 up|down|status|env|purge [--secure]" >&2; exit 2 ;;
	esac
	exit
fi

case ${1:-} in
install) mkdir -p "$state"; install_debs; install_kafka ;;
up) up ;;
down) down ;;
status) status ;;
env) print_env ;;
start | stop) services "$@" ;;
purge) down; rm -rf "$state/kafka" "$state/zookeeper" "$state/redis" ;;
*) echo "usage: $0 up|down|status|env|install|purge [--secure], or $0 start|stop SERVICE..." >&2; exit 2 ;;
esac
