# shellcheck shell=bash
# redis.sh: a real Redis Cluster and a Redis Sentinel setup on 127.0.0.1,
# sourced by stack.sh for `--redis-cluster` and `--redis-sentinel`
# (docs/operations.md, "Redis Cluster and Sentinel"). Debian's redis-server
# (7.0); stack.sh's install_debs installs it when missing.
#
# --redis-cluster: six redis-server processes in cluster mode, three masters
# with one replica each, made by `redis-cli --cluster create --cluster-replicas
# 1`. Members redis1..redis6 on ports HOTSPOT_REDIS_CLUSTER_PORT (17001) to
# 17006, their cluster bus 10000 above (27001-27006). State, configs and logs
# in $state/redis-cluster/redisN. A restarted node rejoins with its nodes.conf;
# `up` with nothing running starts from clean (new configs, no nodes.conf) so
# that creating the cluster always works.
#
# --redis-sentinel: a primary (HOTSPOT_REDIS_SENTINEL_PORT, 17101), one
# replica (17102, `replicaof` the primary) and three sentinels (17201-17203)
# monitoring master name `hotspot` with quorum 2. State in
# $state/redis-sentinel/{primary,replica,sentinel1..3}; the sentinels and
# Redis rewrite their own config files there. The member names are only the
# processes on their ports: after a failover "primary" is the process on 17101,
# which is then a replica; `status` and SENTINEL get-master-addr-by-name
# hotspot say which one is the primary.
#
# Neither persists anything (save "", appendonly no): a node restarted before
# a replica took over its slots (or before the sentinels promoted the replica)
# comes back empty, and its replica copies the empty data set.
#
# `start|stop|kill MEMBER` (the fault tests): kill sends SIGKILL, stop SIGTERM
# and waits for the exit, start runs the member again on its existing config.
# `down` stops every member (SIGTERM, up to 10 s, then SIGKILL).
#
# Measured on the 2-core development machine (Redis 7.0.15): `up
# --redis-cluster` takes 2.2 to 2.6 s from nothing, `up --redis-sentinel` 2.9
# to 3.4 s (the sentinels find each other through 2-second hello messages),
# `up` on a running setup 0.3 s. Idle, each redis-server holds about 13 MB
# resident (ps -o rss): 78 MB for the six cluster nodes, 62 MB for the
# primary, replica and three sentinels. After a SIGKILL, a master's replica
# serves its slots (cluster_state:ok everywhere) 2.1 to 2.7 s later, and the
# sentinels all name the replica as primary 2.4 to 2.5 s later. A restarted
# cluster node is a replica of its successor at once (within 0.5 s); a
# restarted former primary runs as a second, empty primary for about 11 s
# until the sentinels make it a replica (Sentinel waits 8 s, four hello
# periods, before it reconfigures an instance that says it is a master).

rcstate=$state/redis-cluster
rsstate=$state/redis-sentinel
rc_base=${HOTSPOT_REDIS_CLUSTER_PORT:-17001}
rs_base=${HOTSPOT_REDIS_SENTINEL_PORT:-17101}
rs_master=hotspot
rc_members=(redis1 redis2 redis3 redis4 redis5 redis6)
rs_members=(primary replica sentinel1 sentinel2 sentinel3)

# rcli PORT ARG...: a command to the Redis on 127.0.0.1:PORT, its answer
# without carriage returns; fails when the server is unreachable or answers
# with an error, and after 2 s.
rcli() {
	local port=$1
	shift
	timeout 2 redis-cli -e -h 127.0.0.1 -p "$port" "$@" 2>/dev/null | tr -d '\r'
}

r_need_server() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return
	install_debs # the stack's Debian packages, redis-server (and redis-tools' redis-cli) among them
	command -v redis-server >/dev/null || die "installing Debian's redis-server did not provide redis-server"
}

r_pid() { cat "$1/redis.pid" 2>/dev/null; }

r_alive() { # r_alive DIR: the member of DIR runs; a zombie (exited, not yet reaped) does not count
	local pid st
	pid=$(r_pid "$1") || return 1
	[[ -n $pid ]] || return 1
	st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ -n $st && ${st:0:1} != Z && ${st:0:1} != X ]]
}

r_any_alive() { # r_any_alive DIR...
	local dir
	for dir in "$@"; do r_alive "$dir" && return 0; done
	return 1
}

r_wait() { # r_wait SECONDS CMD...: run CMD every 0.2 s until it succeeds; fails after SECONDS
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.2
	done
}

r_answers() { [[ $(rcli "$1" PING) == PONG ]]; } # r_answers PORT

r_ms() { date +%s%3N; }

r_start() { # r_start DIR PORT [--sentinel]: run the member of DIR on its config (DIR/redis.conf or DIR/sentinel.conf)
	local dir=$1 port=$2 mode=${3:-} conf
	r_alive "$dir" && return
	conf=$dir/redis.conf
	[[ $mode == --sentinel ]] && conf=$dir/sentinel.conf
	[[ -f $conf ]] || die "no $conf: run \`$0 up\` with the setup's flag first"
	port_open "$port" && die "port $port is taken by a process this script did not start"
	log "starting ${dir##*/} on 127.0.0.1:$port"
	# shellcheck disable=SC2086 # $mode is one word or none
	nohup redis-server "$conf" $mode >>"$dir/redis.log" 2>&1 </dev/null &
	echo $! >"$dir/redis.pid"
}

r_stop() { # r_stop DIR...: stop the running members of DIRs: SIGTERM, up to 10 s to exit, then SIGKILL
	local dir live=() i
	for dir in "$@"; do
		if ! r_alive "$dir"; then
			rm -f "$dir/redis.pid"
			continue
		fi
		log "stopping ${dir##*/} (pid $(r_pid "$dir"))"
		kill "$(r_pid "$dir")" 2>/dev/null || true
		live+=("$dir")
	done
	((${#live[@]})) || return 0
	for i in $(seq 50); do
		r_any_alive "${live[@]}" || break
		sleep 0.2
	done
	for dir in "${live[@]}"; do
		if r_alive "$dir"; then
			log "${dir##*/} did not exit 10 s after SIGTERM; sending SIGKILL"
			kill -9 "$(r_pid "$dir")" 2>/dev/null || true
		fi
	done
	for i in $(seq 50); do
		r_any_alive "${live[@]}" || break
		sleep 0.1
	done
	for dir in "${live[@]}"; do rm -f "$dir/redis.pid"; done
}

r_kill() { # r_kill DIR: SIGKILL to the member of DIR, and wait until it is gone
	local dir=$1 i
	r_alive "$dir" || return 0
	log "killing ${dir##*/} (SIGKILL, pid $(r_pid "$dir"))"
	kill -9 "$(r_pid "$dir")" 2>/dev/null || true
	for i in $(seq 50); do
		r_alive "$dir" || break
		sleep 0.1
	done
	rm -f "$dir/redis.pid"
}

r_state() { # r_state DIR: running (pid N) or stopped
	if r_alive "$1"; then echo "running (pid $(r_pid "$1"))"; else echo stopped; fi
}

# --- Redis Cluster ---------------------------------------------------------

rc_port() { echo $((rc_base + ${1#redis} - 1)); } # rc_port redisN

rc_name() { echo "redis$(($1 - rc_base + 1))"; } # rc_name PORT

rcluster_env() {
	local m out=""
	for m in "${rc_members[@]}"; do out+=${out:+,}127.0.0.1:$(rc_port "$m"); done
	echo "export HOTSPOT_REDIS_CLUSTER=$out"
}

rcluster_config() { # rcluster_config NAME: a fresh folder and config for member NAME
	local dir=$rcstate/$1 port
	port=$(rc_port "$1")
	rm -rf "$dir"
	mkdir -p "$dir"
	cat >"$dir/redis.conf" <<EOF
# $1 of the local Redis Cluster (deployments/local/redis.sh); Redis keeps the
# cluster's state in nodes.conf beside it.
bind 127.0.0.1
port $port
dir $dir
cluster-enabled yes
cluster-config-file nodes.conf
# A node that does not answer for 1 s is flagged failing and, once the other
# masters agree, its replica takes over: a failover 2 to 3 s after a master's
# death (Redis's default is 15 s). The price: a master stalled for a second (a
# slow command, a fork, a starved CPU on a loaded machine) is failed over all
# the same, and with asynchronous replication every failover loses the writes
# its replica had not received; a master cut off from the majority refuses
# writes after 1 s; each node pings every other at least every 0.5 s.
cluster-node-timeout 1000
save ""
appendonly no
# A replica's full sync starts at once, not after 5 s of waiting for more
# replicas to share the transfer (there is one per master here).
repl-diskless-sync-delay 0
EOF
}

rcluster_healthy() { # every node says cluster_state:ok, 3 masters with one replica each, replication links up
	local m port info
	for m in "${rc_members[@]}"; do
		port=$(rc_port "$m")
		info=$(rcli "$port" CLUSTER INFO) || return 1
		[[ $info == *cluster_state:ok* && $info == *cluster_slots_assigned:16384* &&
			$info == *cluster_slots_ok:16384* && $info == *cluster_known_nodes:6* ]] || return 1
		info=$(rcli "$port" INFO replication) || return 1
		[[ ($info == *role:master* && $info == *connected_slaves:1*) ||
			($info == *role:slave* && $info == *master_link_status:up*) ]] || return 1
	done
	# CLUSTER NODES: id addr flags master-id ping pong epoch link-state slot...
	rcli "$(rc_port redis1)" CLUSTER NODES | awk '
		{ n++ }
		$3 ~ /fail|handshake|noaddr/ || $8 != "connected" { bad++ }
		$3 ~ /master/ && NF >= 9 { master[$1] = 1; masters++ }
		$3 ~ /slave/ { replicas[$4]++ }
		END {
			if (n != 6 || bad || masters != 3) exit 1
			for (m in master) if (replicas[m] != 1) exit 1
		}'
}

rcluster_blank() { # every node runs alone, no slots assigned: the cluster is still to be created
	local m info
	for m in "${rc_members[@]}"; do
		info=$(rcli "$(rc_port "$m")" CLUSTER INFO) || return 1
		[[ $info == *cluster_known_nodes:1$'\n'* && $info == *cluster_slots_assigned:0$'\n'* ]] || return 1
	done
}

rcluster_up() {
	local m fresh=1 t0 addrs=()
	t0=$(r_ms)
	r_need_server
	mkdir -p "$rcstate"
	for m in "${rc_members[@]}"; do r_alive "$rcstate/$m" && fresh=0; done
	if ((fresh)); then
		for m in "${rc_members[@]}"; do
			port_open $(($(rc_port "$m") + 10000)) &&
				die "port $(($(rc_port "$m") + 10000)) (the cluster bus of $m) is taken by a process this script did not start (set HOTSPOT_REDIS_CLUSTER_PORT)"
			rcluster_config "$m"
		done
	fi
	for m in "${rc_members[@]}"; do r_start "$rcstate/$m" "$(rc_port "$m")"; done
	for m in "${rc_members[@]}"; do
		addrs+=("127.0.0.1:$(rc_port "$m")")
		r_wait 15 r_answers "$(rc_port "$m")" || die "$m did not answer; see $rcstate/$m/redis.log"
	done
	if rcluster_blank; then
		log "creating the Redis Cluster: 3 masters, 3 replicas"
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$rcstate/create.log" 2>&1 || {
			cat "$rcstate/create.log" >&2
			die "redis-cli --cluster create failed; \`$0 purge --redis-cluster\` and \`up\` start from scratch"
		}
	fi
	r_wait 60 rcluster_healthy || {
		rcluster_status >&2 || true
		die "the Redis Cluster is not healthy after 60 s; logs in $rcstate/redisN/redis.log"
	}
	log "Redis Cluster up in $(($(r_ms) - t0)) ms; state and logs in $rcstate"
	rcluster_env
}

rcluster_down() {
	local dirs=() m
	for m in "${rc_members[@]}"; do dirs+=("$rcstate/$m"); done
	r_stop "${dirs[@]}"
}

rcluster_purge() {
	rcluster_down
	rm -rf "$rcstate"
}

rcluster_status() {
	local m port rc=0 nodes="" info="" state=""
	for m in "${rc_members[@]}"; do
		r_alive "$rcstate/$m" || continue
		port=$(rc_port "$m")
		nodes=$(rcli "$port" CLUSTER NODES) && info=$(rcli "$port" CLUSTER INFO) && break
	done
	for m in "${rc_members[@]}"; do
		port=$(rc_port "$m")
		printf '%s: %s, 127.0.0.1:%s' "$m" "$(r_state "$rcstate/$m")" "$port"
		r_alive "$rcstate/$m" || rc=1
		# its line in CLUSTER NODES: master with its slots, or replica of which node
		awk -v me="127.0.0.1:$port" -v base="$rc_base" '
			{ split($2, a, "@"); addr[$1] = a[1] }
			{ line[NR] = $0 }
			END {
				for (i = 1; i <= NR; i++) {
					split(line[i], f, " "); split(f[2], a, "@")
					if (a[1] != me) continue
					state = f[3] ~ /fail\?/ ? ", suspected failing" : f[3] ~ /fail/ ? ", failed" : ""
					if (f[3] ~ /master/) {
						slots = ""
						for (j = 9; j in f; j++) slots = slots " " f[j]
						printf ", master%s (slots%s)", state, slots == "" ? " none" : slots
					} else if (f[4] in addr) {
						split(addr[f[4]], p, ":")
						printf ", replica of redis%d%s", p[2] - base + 1, state
					}
				}
			}' <<<"$nodes"
		echo
	done
	state=$(sed -n 's/^cluster_state://p' <<<"$info")
	echo "cluster_state: ${state:-unknown (no node answers)}"
	[[ $state == ok ]] || rc=1
	return $rc
}

rcluster_member() { # rcluster_member start|stop|kill NAME
	local verb=$1 name=$2 dir
	[[ $name =~ ^redis[1-6]$ ]] || die "unknown Redis Cluster member '$name' (redis1..redis6)"
	dir=$rcstate/$name
	case $verb in
	start)
		r_start "$dir" "$(rc_port "$name")"
		r_wait 15 r_answers "$(rc_port "$name")" || die "$name did not answer; see $dir/redis.log"
		;;
	stop) r_stop "$dir" ;;
	kill) r_kill "$dir" ;;
	esac
}

# --- Redis Sentinel --------------------------------------------------------

rs_port() { # rs_port NAME: primary at the base port, replica one above, sentinelN at base+100+N-1
	case $1 in
	primary) echo "$rs_base" ;;
	replica) echo $((rs_base + 1)) ;;
	sentinel[1-3]) echo $((rs_base + 100 + ${1#sentinel} - 1)) ;;
	esac
}

rs_mode() { if [[ $1 == sentinel* ]]; then echo --sentinel; fi; } # rs_mode NAME: the member's redis-server flag

rsentinel_env() {
	local i out=""
	for i in 1 2 3; do out+=${out:+,}127.0.0.1:$(rs_port "sentinel$i"); done
	echo "export HOTSPOT_REDIS_SENTINEL=$out"
	echo "export HOTSPOT_REDIS_SENTINEL_MASTER=$rs_master"
}

rsentinel_config() { # rsentinel_config NAME: a fresh folder and config for member NAME
	local name=$1 dir=$rsstate/$1 port
	port=$(rs_port "$name")
	rm -rf "$dir"
	mkdir -p "$dir"
	if [[ $name == sentinel* ]]; then
		# Sentinel rewrites this file (its id, the replicas and sentinels it
		# found, the current primary): it must stay writable.
		cat >"$dir/sentinel.conf" <<EOF
# $name of the local Redis Sentinel setup (deployments/local/redis.sh)
bind 127.0.0.1
port $port
dir $dir
sentinel monitor $rs_master 127.0.0.1 $(rs_port primary) 2
# The primary counts as down after 1 s without an answer (the default is 30 s)
# and the replica is promoted 2 to 3 s after its death. The price: a primary
# stalled for a second (a slow command, a fork, a starved CPU on a loaded
# machine) is failed over all the same, and with asynchronous replication every
# failover loses the writes the replica had not received.
sentinel down-after-milliseconds $rs_master 1000
# A failover that has not promoted the replica within 5 s is abandoned, and a
# sentinel tries the same primary again only 10 s (twice this) after its last
# try (the default is 180 s): on a slow machine a slow failover is cut short
# and retried; a replica found replicating from the wrong primary is pointed
# at the right one after 5 s.
sentinel failover-timeout $rs_master 5000
sentinel parallel-syncs $rs_master 1
EOF
	else
		{
			cat <<EOF
# $name of the local Redis Sentinel setup (deployments/local/redis.sh); the
# sentinels rewrite it when they make it a primary or a replica.
bind 127.0.0.1
port $port
dir $dir
save ""
appendonly no
# a replica's full sync starts at once (the default waits 5 s for more replicas)
repl-diskless-sync-delay 0
EOF
			if [[ $name == replica ]]; then echo "replicaof 127.0.0.1 $(rs_port primary)"; fi
		} >"$dir/redis.conf"
	fi
}

rs_field() { # rs_field KEY: the value after KEY in redis-cli's key/value lines on stdin
	awk -v k="$1" 'NR % 2 == 1 && $0 == k { getline v; print v; exit }'
}

rsentinel_healthy() { # every sentinel sees the same primary, up, with 1 replica (up, linked) and 2 other sentinels
	local i port info addr first="" replica=""
	for i in 1 2 3; do
		port=$(rs_port "sentinel$i")
		info=$(rcli "$port" SENTINEL MASTER "$rs_master") || return 1
		[[ $(rs_field flags <<<"$info") == master && $(rs_field num-slaves <<<"$info") == 1 &&
			$(rs_field num-other-sentinels <<<"$info") == 2 ]] || return 1
		addr=$(rs_field ip <<<"$info"):$(rs_field port <<<"$info")
		[[ -z $first || $addr == "$first" ]] || return 1
		first=$addr
		info=$(rcli "$port" SENTINEL REPLICAS "$rs_master") || return 1
		[[ $(rs_field flags <<<"$info") == slave ]] || return 1
		replica=$(rs_field ip <<<"$info"):$(rs_field port <<<"$info")
	done
	# the replication link itself, from both ends (the sentinels' view of it
	# is up to 10 s old)
	info=$(rcli "${first##*:}" INFO replication) || return 1
	[[ $info == *role:master* && $info == *connected_slaves:1* ]] || return 1
	info=$(rcli "${replica##*:}" INFO replication) || return 1
	[[ $info == *role:slave* && $info == *master_link_status:up* && $info == *master_port:${first##*:}$'\n'* ]]
}

rsentinel_up() {
	local m fresh=1 t0
	t0=$(r_ms)
	r_need_server
	mkdir -p "$rsstate"
	for m in "${rs_members[@]}"; do r_alive "$rsstate/$m" && fresh=0; done
	if ((fresh)); then
		for m in "${rs_members[@]}"; do rsentinel_config "$m"; done
	fi
	for m in primary replica sentinel1 sentinel2 sentinel3; do
		r_start "$rsstate/$m" "$(rs_port "$m")" "$(rs_mode "$m")"
		r_wait 15 r_answers "$(rs_port "$m")" || die "$m did not answer; see $rsstate/$m/redis.log"
	done
	r_wait 60 rsentinel_healthy || {
		rsentinel_status >&2 || true
		die "the Redis Sentinel setup is not healthy after 60 s; logs in $rsstate/*/redis.log"
	}
	log "Redis Sentinel setup up in $(($(r_ms) - t0)) ms; state and logs in $rsstate"
	rsentinel_env
}

rsentinel_down() { # the sentinels first, so that stopping the primary starts no failover
	r_stop "$rsstate/sentinel1" "$rsstate/sentinel2" "$rsstate/sentinel3"
	r_stop "$rsstate/replica" "$rsstate/primary"
}

rsentinel_purge() {
	rsentinel_down
	rm -rf "$rsstate"
}

rsentinel_status() {
	local m port rc=0 role addr primary="" p
	for m in "${rs_members[@]}"; do
		port=$(rs_port "$m")
		printf '%s: %s, 127.0.0.1:%s' "$m" "$(r_state "$rsstate/$m")" "$port"
		if ! r_alive "$rsstate/$m"; then
			rc=1
			echo
			continue
		fi
		role=$(rcli "$port" ROLE) || role=""
		case $role in
		master*) echo ", primary" ;;
		slave*)
			# ROLE of a replica: slave, primary's ip, port, link state, offset
			mapfile -t p <<<"$role"
			echo ", replica of ${p[1]}:${p[2]} (${p[3]})"
			;;
		sentinel*)
			addr=$(rcli "$port" SENTINEL get-master-addr-by-name "$rs_master" | paste -sd:) || addr=""
			echo ", primary of $rs_master at ${addr:-unknown}"
			[[ -n $addr && ( -z $primary || $primary == "$addr" ) ]] || rc=1
			primary=${primary:-$addr}
			;;
		*) echo ", does not answer"; rc=1 ;;
		esac
	done
	echo "primary of $rs_master: ${primary:-unknown (no sentinel answers)}"
	return $rc
}

rsentinel_member() { # rsentinel_member start|stop|kill NAME
	local verb=$1 name=$2 dir
	[[ $name =~ ^(primary|replica|sentinel[1-3])$ ]] ||
		die "unknown Redis Sentinel member '$name' (primary, replica, sentinel1..3)"
	dir=$rsstate/$name
	case $verb in
	start)
		r_start "$dir" "$(rs_port "$name")" "$(rs_mode "$name")"
		r_wait 15 r_answers "$(rs_port "$name")" || die "$name did not answer; see $dir/redis.log"
		;;
	stop) r_stop "$dir" ;;
	kill) r_kill "$dir" ;;
	esac
}
