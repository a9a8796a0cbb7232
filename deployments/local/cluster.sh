# cluster.sh: the clustered local stack, sourced by stack.sh for `--cluster`.
#
# Apache Kafka in KRaft mode with its roles split, as production clusters run
# it: three brokers and, apart from them, three controllers (a static quorum
# of three voters). Topics get three replicas and need two in sync
# (default.replication.factor=3, min.insync.replicas=2, the internal topics
# alike). A ZooKeeper ensemble of three servers and, beside it, two
# observers (peerType=observer: servers 4 and 5, which vote in no election and
# acknowledge no write, but hold every node and serve sessions and watches,
# so that the apps' watchers do not load the quorum; docs/operations.md,
# "ZooKeeper observers"); and one Redis. All on 127.0.0.1, beside the plain
# and the secured stacks: its own state folder ($state/cluster) and ports,
# from HOTSPOT_CLUSTER_KAFKA_PORT (19192: brokers on 19192, 19194, 19196, the
# controllers one above each), and HOTSPOT_CLUSTER_ZK_PORT (12281: clients on
# 12281-12283, quorum on 12381-12383, elections on 12481-12483; the
# observers' clients on 12284-12285, quorum on 12384-12385, elections on
# 12484-12485), HOTSPOT_CLUSTER_REDIS_PORT (16479). `env` gives the
# ensemble's addresses as HOTSPOT_ZK and the observers' as
# HOTSPOT_ZK_OBSERVERS. It reuses the plain stack's Kafka jars.
#
# A dead broker is fenced, its partitions given new leaders and dropped from
# their in-sync replicas, once it missed heartbeats for
# broker.session.timeout.ms: 1 s here (heartbeats every 250 ms) (Kafka's
# default is 9 s). Until then no write with acks=all to a partition it
# replicates is acknowledged and no consumer reads past it, so this bounds how
# long a broker's death stalls detection. A follower whose leader died tries
# the new one after replica.fetch.backoff.ms, 100 ms here (1 s by default):
# until it has fetched a record, acks=all does not acknowledge it. With the
# roles combined, killing a
# broker also killed a controller, a third of the time the active one, and
# the fencing waited for a new one to be elected: 1 to 2 s more. The
# controllers elect a new active one after 1 s without it.
#
# `start NAME` and `stop NAME` (kafka1..3, controller1..3, zookeeper1..3,
# observer1..2, redis) start or stop one member, `kill NAME` sends it SIGKILL: the fault
# tests use them.

cstate=$state/cluster
c_kafka_base=${HOTSPOT_CLUSTER_KAFKA_PORT:-19192}
c_zk_base=${HOTSPOT_CLUSTER_ZK_PORT:-12281}
c_redis_port=${HOTSPOT_CLUSTER_REDIS_PORT:-16479}
c_nodes=(1 2 3)
c_observers=(1 2) # ZooKeeper observers: server ids 4 and 5

c_kafka_port() { echo $((c_kafka_base + 2 * ($1 - 1))); }
c_ctl_port() { echo $((c_kafka_base + 2 * ($1 - 1) + 1)); }
c_zk_port() { echo $((c_zk_base + $1 - 1)); }
c_obs_id() { echo $((${#c_nodes[@]} + $1)); } # observer N's server id
c_obs_port() { c_zk_port "$(c_obs_id "$1")"; }

c_join() { # c_join FUNC [N...]: FUNC's output for every node (or each N), comma-separated
	local out="" i f=$1
	shift
	(($# > 0)) || set -- "${c_nodes[@]}"
	for i in "$@"; do out+=${out:+,}127.0.0.1:$("$f" "$i"); done
	echo "$out"
}

cluster_zookeeper() { # cluster_zookeeper N: start ensemble member N
	c_zk_server "$cstate/zookeeper$1" "$1" "ZooKeeper $1 of 3"
}

cluster_observer() { # cluster_observer N: start observer N (server id 3+N)
	c_zk_server "$cstate/observer$1" "$(c_obs_id "$1")" "ZooKeeper observer $1 of ${#c_observers[@]}" observer
}

c_zk_server() { # c_zk_server DIR ID WHAT [observer]: start ZooKeeper server ID in DIR
	local dir=$1 id=$2 what=$3 role=${4:-} port i
	if alive zookeeper "$dir"; then
		grep -q ':observer$' "$dir/zoo.cfg" ||
			log "$what runs with a configuration that lists no observer (an earlier version's): restart it (stack.sh stop, then start, ${dir##*/} --cluster) to admit them"
		return
	fi
	port=$(c_zk_port "$id")
	port_open "$port" && die "port $port is taken by a process this script did not start (set HOTSPOT_CLUSTER_ZK_PORT)"
	mkdir -p "$dir/data"
	echo "$id" >"$dir/data/myid"
	{
		cat <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
maxSessionTimeout=60000
minSessionTimeout=1000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr,cons,stat
EOF
		# Every server lists every other, the observers marked as such
		# (ZooKeeper's static configuration: an observer missing from a
		# participant's list is refused when it connects).
		for i in "${c_nodes[@]}"; do
			echo "server.$i=127.0.0.1:$((c_zk_base + 100 + i - 1)):$((c_zk_base + 200 + i - 1))"
		done
		for i in "${c_observers[@]}"; do
			i=$(c_obs_id "$i")
			echo "server.$i=127.0.0.1:$((c_zk_base + 100 + i - 1)):$((c_zk_base + 200 + i - 1)):observer"
		done
		[[ $role == observer ]] && echo "peerType=observer"
	} >"$dir/zoo.cfg"
	log "starting $what on 127.0.0.1:$port"
	launch_zookeeper "$dir" "$dir"
}

c_voters() { # c_voters: the controller quorum, id@host:port,...
	local out="" i
	for i in "${c_nodes[@]}"; do out+=${out:+,}$((100 + i))@127.0.0.1:$(c_ctl_port "$i"); done
	echo "$out"
}

c_format() { # c_format DIR: format DIR's storage with the cluster's id, once
	local dir=$1
	[[ -f $dir/data-$kafka_version/meta.properties ]] && return
	[[ -f $cstate/cluster.id ]] || kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1 >"$cstate/cluster.id"
	KAFKA_CLUSTER_ID=$(cat "$cstate/cluster.id") format_kafka "$dir" "$dir"
}

c_start_node() { # c_start_node DIR PORT HEAP WHAT: start the KRaft node of DIR on PORT, its server.properties from stdin
	local dir=$1 port=$2 heap=$3 what=$4
	port_open "$port" && die "port $port is taken by a process this script did not start (set HOTSPOT_CLUSTER_KAFKA_PORT)"
	mkdir -p "$dir"
	cat >"$dir/server.properties"
	kafka_log4j "$dir"
	c_format "$dir"
	log "starting Apache Kafka $kafka_version $what of 3 on 127.0.0.1:$port"
	HOTSPOT_KAFKA_HEAP=$heap launch_kafka "$dir" "$dir"
}

cluster_controller() { # cluster_controller N: start KRaft controller N (node id 100+N)
	local n=$1 dir ctl
	dir=$cstate/controller$n
	alive kafka "$dir" && return
	ctl=$(c_ctl_port "$n")
	c_start_node "$dir" "$ctl" "${HOTSPOT_KAFKA_CONTROLLER_HEAP:-192m}" "controller $n" <<EOF
process.roles=controller
node.id=$((100 + n))
controller.quorum.voters=$(c_voters)
listeners=CONTROLLER://127.0.0.1:$ctl
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT
log.dirs=$dir/data-$kafka_version
num.partitions=$partitions
default.replication.factor=3
min.insync.replicas=2
broker.session.timeout.ms=1000
controller.quorum.fetch.timeout.ms=1000
controller.quorum.election.timeout.ms=500
EOF
}

cluster_kafka() { # cluster_kafka N: start Kafka broker N
	local n=$1 dir port
	dir=$cstate/kafka$n
	alive kafka "$dir" && return
	port=$(c_kafka_port "$n")
	c_start_node "$dir" "$port" "${HOTSPOT_KAFKA_HEAP:-384m}" "broker $n" <<EOF
process.roles=broker
node.id=$n
controller.quorum.voters=$(c_voters)
listeners=PLAINTEXT://127.0.0.1:$port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
$(kafka_broker_settings "$dir")
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
unclean.leader.election.enable=false
broker.heartbeat.interval.ms=250
broker.session.timeout.ms=1000
replica.fetch.backoff.ms=100
EOF
}

cluster_redis() {
	state=$cstate redis_port=$c_redis_port start_redis
}

cluster_env() {
	echo "export HOTSPOT_KAFKA=$(c_join c_kafka_port)"
	echo "export HOTSPOT_ZK=$(c_join c_zk_port)"
	echo "export HOTSPOT_ZK_OBSERVERS=$(c_join c_obs_port "${c_observers[@]}")"
	echo "export HOTSPOT_REDIS=127.0.0.1:$c_redis_port"
	echo "export HOTSPOT_CLUSTER=1"
}

cluster_up() {
	local i
	mkdir -p "$cstate"
	install_debs
	install_kafka
	if [[ -d $cstate/kafka1 && ! -d $cstate/controller1 ]]; then
		# Made by an earlier version, with each node broker and controller.
		log "the cluster's Kafka state is of the combined layout; formatting it afresh"
		for i in "${c_nodes[@]}"; do stop_one kafka "$cstate/kafka$i" "Kafka node $i"; done
		rm -rf "$cstate"/kafka[1-3] "$cstate/cluster.id"
	fi
	for i in "${c_nodes[@]}"; do cluster_zookeeper "$i"; done
	for i in "${c_observers[@]}"; do cluster_observer "$i"; done
	cluster_redis
	for i in "${c_nodes[@]}"; do cluster_controller "$i"; done
	for i in "${c_nodes[@]}"; do cluster_kafka "$i"; done
	for i in "${c_nodes[@]}"; do
		alive zookeeper "$cstate/zookeeper$i" || die "ZooKeeper $i exited at start; see $cstate/zookeeper$i/zookeeper.log"
		alive kafka "$cstate/controller$i" || die "Kafka controller $i exited at start; see $cstate/controller$i/kafka.log"
		alive kafka "$cstate/kafka$i" || die "Kafka broker $i exited at start; see $cstate/kafka$i/kafka.log"
	done
	for i in "${c_observers[@]}"; do
		alive zookeeper "$cstate/observer$i" || die "ZooKeeper observer $i exited at start; see $cstate/observer$i/zookeeper.log"
	done
	alive redis "$cstate" || die "Redis exited at start; see $cstate/redis.log"
	(cd "$top" && go run ./deployments/local/probe -wait 180s -brokers 3 \
		-kafka "$(c_join c_kafka_port)" -zk "$(c_join c_zk_port),$(c_join c_obs_port "${c_observers[@]}")" -redis "127.0.0.1:$c_redis_port") ||
		die "the cluster did not answer in time; logs are in $cstate"
	log "cluster up; state and logs in $cstate"
	cluster_env
}

cluster_down() {
	local i
	for i in "${c_nodes[@]}"; do stop_one kafka "$cstate/kafka$i" "Kafka broker $i"; done
	for i in "${c_nodes[@]}"; do stop_one kafka "$cstate/controller$i" "Kafka controller $i"; done
	stop_one redis "$cstate" "Redis (cluster)"
	for i in "${c_observers[@]}"; do stop_one zookeeper "$cstate/observer$i" "ZooKeeper observer $i"; done
	for i in "${c_nodes[@]}"; do stop_one zookeeper "$cstate/zookeeper$i" "ZooKeeper $i"; done
}

cluster_status() {
	local i rc=0
	for i in "${c_nodes[@]}"; do
		if alive zookeeper "$cstate/zookeeper$i"; then
			echo "zookeeper$i: running (pid $(cat "$cstate/zookeeper$i/zookeeper.pid")), $(c_zk_mode "$(c_zk_port "$i")")"
		else
			echo "zookeeper$i: stopped"
			rc=1
		fi
	done
	for i in "${c_observers[@]}"; do
		if alive zookeeper "$cstate/observer$i"; then
			echo "observer$i: running (pid $(cat "$cstate/observer$i/zookeeper.pid")), $(c_zk_mode "$(c_obs_port "$i")")"
		else
			echo "observer$i: stopped"
			rc=1
		fi
	done
	for i in "${c_nodes[@]}"; do
		if alive kafka "$cstate/controller$i"; then echo "controller$i: running (pid $(cat "$cstate/controller$i/kafka.pid"))"; else echo "controller$i: stopped"; rc=1; fi
	done
	for i in "${c_nodes[@]}"; do
		if alive kafka "$cstate/kafka$i"; then echo "kafka$i: running (pid $(cat "$cstate/kafka$i/kafka.pid"))"; else echo "kafka$i: stopped"; rc=1; fi
	done
	if alive redis "$cstate"; then echo "redis: running (pid $(cat "$cstate/redis.pid"))"; else echo "redis: stopped"; rc=1; fi
	return $rc
}

c_zk_mode() { # c_zk_mode PORT: leader, follower or observer, from the srvr command
	local mode
	mode=$(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 && grep -m1 '^Mode:' <&3) 2>/dev/null || true
	echo "${mode#Mode: }"
}

cluster_member() { # cluster_member start|stop|kill NAME
	local verb=$1 name=$2 dir what
	case $name in
	kafka[1-3] | controller[1-3]) dir=$cstate/$name what=kafka ;;
	zookeeper[1-3] | observer[1-2]) dir=$cstate/$name what=zookeeper ;;
	redis) dir=$cstate what=redis ;;
	*) die "unknown cluster member $name (kafka1..3, controller1..3, zookeeper1..3, observer1..2, redis)" ;;
	esac
	case $verb in
	start)
		case $what in
		kafka) if [[ $name == controller* ]]; then cluster_controller "${name#controller}"; else cluster_kafka "${name#kafka}"; fi ;;
		zookeeper) if [[ $name == observer* ]]; then cluster_observer "${name#observer}"; else cluster_zookeeper "${name#zookeeper}"; fi ;;
		redis) cluster_redis ;;
		esac
		;;
	stop) stop_one "$what" "$dir" "$name" ;;
	kill)
		alive "$what" "$dir" || return 0
		log "killing $name (SIGKILL, pid $(cat "$dir/$what.pid"))"
		kill -9 "$(cat "$dir/$what.pid")"
		rm -f "$dir/$what.pid"
		;;
	esac
}
