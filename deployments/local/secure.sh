# secure.sh: the secured local stack, sourced by stack.sh for `--secure`.
#
# Kafka with one SASL_SSL listener (SCRAM-SHA-256 and SCRAM-SHA-512; the
# brokers talk to each other over it too), ZooKeeper that refuses every
# unauthenticated request (enforce.auth, digest), and Redis with TLS only and
# an ACL user (the default user is off). Certificates come from openssl:
# a CA and one server certificate for 127.0.0.1/localhost. Passwords are
# random, made once, and kept with the certificates in $sstate (mode 0700).
#
# It runs beside the plain stack: its own state folder ($state/secure) and
# ports (HOTSPOT_SECURE_KAFKA_PORT 29092, ..._KAFKA_CONTROLLER_PORT 29093,
# ..._ZK_PORT 22181, ..._REDIS_PORT 26379). It reuses the plain stack's
# Kafka jars ($state/kafka-$kafka_version, or HOTSPOT_KAFKA_LIBS).

sstate=$state/secure
s_kafka_port=${HOTSPOT_SECURE_KAFKA_PORT:-29092}
s_kafka_ctl_port=${HOTSPOT_SECURE_KAFKA_CONTROLLER_PORT:-29093}
s_zk_port=${HOTSPOT_SECURE_ZK_PORT:-22181}
s_redis_port=${HOTSPOT_SECURE_REDIS_PORT:-26379}
s_tls=$sstate/tls
s_creds=$sstate/credentials.env
kafka_libs=${HOTSPOT_KAFKA_LIBS:-$state/kafka-$kafka_version/libs}

s_alive() { alive "$1" "$sstate"; }

secure_certs() {
	[[ -f $s_tls/server.pem ]] && return
	command -v openssl >/dev/null || die "openssl is needed for the secured stack (apt-get install openssl)"
	log "making a CA and a server certificate for 127.0.0.1 with openssl"
	mkdir -p "$s_tls"
	chmod 700 "$sstate" "$s_tls"
	openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=Hotspot local CA" \
		-keyout "$s_tls/ca.key" -out "$s_tls/ca.pem" 2>/dev/null
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$s_tls/server.key" 2>/dev/null
	openssl req -new -key "$s_tls/server.key" -subj "/CN=localhost" -out "$s_tls/server.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$s_tls/ext.cnf"
	openssl x509 -req -in "$s_tls/server.csr" -CA "$s_tls/ca.pem" -CAkey "$s_tls/ca.key" -CAcreateserial \
		-days 825 -extfile "$s_tls/ext.cnf" -out "$s_tls/server.pem" 2>/dev/null
	# Kafka's PEM key store: the PKCS#8 key, then the certificate chain.
	cat "$s_tls/server.key" "$s_tls/server.pem" "$s_tls/ca.pem" >"$s_tls/kafka-keystore.pem"
	chmod 600 "$s_tls"/*.key "$s_tls/kafka-keystore.pem"
}

secure_credentials() {
	[[ -f $s_creds ]] && return
	mkdir -p "$sstate"
	chmod 700 "$sstate"
	pw() { openssl rand -hex 16; }
	umask 077
	cat >"$s_creds" <<EOF
S_KAFKA_ADMIN_PASSWORD=$(pw)
S_KAFKA_USER=hotspot
S_KAFKA_PASSWORD=$(pw)
S_ZK_WRITER=hotspotd:$(pw)
S_ZK_APP=app:$(pw)
S_REDIS_USER=app
S_REDIS_PASSWORD=$(pw)
S_CLUSTER_SECRET=$(pw)$(pw)
EOF
	umask 022
	. "$s_creds"
	printf '%s\n' "$S_CLUSTER_SECRET" >"$sstate/cluster.secret"
	chmod 600 "$sstate/cluster.secret"
}

secure_zookeeper() {
	s_alive zookeeper && return
	port_open "$s_zk_port" && die "port $s_zk_port is taken (set HOTSPOT_SECURE_ZK_PORT)"
	local dir=$sstate/zookeeper
	mkdir -p "$dir/data"
	# enforce.auth: a session that has not authenticated with digest gets
	# no answer to any request (ZooKeeper 3.7+).
	cat >"$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$s_zk_port
clientPortAddress=127.0.0.1
maxClientCnxns=0
maxSessionTimeout=60000
minSessionTimeout=1000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr
enforce.auth.enabled=true
enforce.auth.schemes=digest
EOF
	log "starting ZooKeeper (digest auth enforced) on 127.0.0.1:$s_zk_port"
	launch_zookeeper "$dir" "$sstate"
}

secure_redis() {
	s_alive redis && return
	port_open "$s_redis_port" && die "port $s_redis_port is taken (set HOTSPOT_SECURE_REDIS_PORT)"
	mkdir -p "$sstate/redis"
	# TLS only (port 0 closes the plaintext port); the default user is off,
	# so every client must log in as the app user.
	cat >"$sstate/redis/redis.conf" <<EOF
bind 127.0.0.1
port 0
tls-port $s_redis_port
tls-cert-file $s_tls/server.pem
tls-key-file $s_tls/server.key
tls-ca-cert-file $s_tls/ca.pem
tls-auth-clients no
save ""
appendonly no
dir $sstate/redis
protected-mode yes
maxclients 20000
user default off
user $S_REDIS_USER on >$S_REDIS_PASSWORD ~* &* +@all
EOF
	chmod 600 "$sstate/redis/redis.conf"
	log "starting Redis (TLS, ACL user $S_REDIS_USER) on 127.0.0.1:$s_redis_port"
	nohup redis-server "$sstate/redis/redis.conf" >"$sstate/redis.log" 2>&1 </dev/null &
	echo $! >"$sstate/redis.pid"
}

secure_kafka() {
	s_alive kafka && return
	port_open "$s_kafka_port" && die "port $s_kafka_port is taken (set HOTSPOT_SECURE_KAFKA_PORT)"
	[[ -f $kafka_libs/kafka_2.13-$kafka_version.jar ]] || install_kafka
	local dir=$sstate/kafka
	mkdir -p "$dir"
	local jaas="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"$S_KAFKA_ADMIN_PASSWORD\";"
	cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$s_kafka_ctl_port
listeners=SASL_SSL://127.0.0.1:$s_kafka_port,CONTROLLER://127.0.0.1:$s_kafka_ctl_port
advertised.listeners=SASL_SSL://127.0.0.1:$s_kafka_port
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$jaas
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$jaas
ssl.keystore.type=PEM
ssl.keystore.location=$s_tls/kafka-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$s_tls/ca.pem
ssl.client.auth=none
ssl.endpoint.identification.algorithm=https
$(kafka_broker_settings "$dir")
EOF
	chmod 600 "$dir/server.properties"
	kafka_log4j "$dir"
	if [[ ! -f $dir/data-$kafka_version/meta.properties ]]; then
		log "formatting the secured Kafka's storage with its SCRAM users"
		format_kafka "$dir" "$sstate" \
			--add-scram "SCRAM-SHA-512=[name=admin,password=$S_KAFKA_ADMIN_PASSWORD]" \
			--add-scram "SCRAM-SHA-256=[name=$S_KAFKA_USER,password=$S_KAFKA_PASSWORD]" \
			--add-scram "SCRAM-SHA-512=[name=$S_KAFKA_USER,password=$S_KAFKA_PASSWORD]"
	fi
	log "starting Apache Kafka $kafka_version (SASL_SSL, SCRAM) on 127.0.0.1:$s_kafka_port"
	launch_kafka "$dir" "$sstate"
}

secure_probe() {
	(cd "$top" && go run ./deployments/local/probe -kafka "127.0.0.1:$s_kafka_port" \
		-zk "127.0.0.1:$s_zk_port" -redis "127.0.0.1:$s_redis_port" -ca "$s_tls/ca.pem" \
		-kafka-user "$S_KAFKA_USER" -kafka-password "$S_KAFKA_PASSWORD" \
		-zk-digest "$S_ZK_WRITER" -redis-user "$S_REDIS_USER" -redis-password "$S_REDIS_PASSWORD" "$@")
}

# secure_env prints what clients of the secured stack need: addresses, the
# CA, and the credentials of each identity (hotspotd's and the apps').
secure_env() {
	[[ -f $s_creds ]] || die "no secured stack in $sstate (stack.sh up --secure makes one)"
	. "$s_creds"
	cat <<EOF
export HOTSPOT_SECURE=1
export HOTSPOT_KAFKA=127.0.0.1:$s_kafka_port
export HOTSPOT_ZK=127.0.0.1:$s_zk_port
export HOTSPOT_REDIS=127.0.0.1:$s_redis_port
export HOTSPOT_TLS_CA=$s_tls/ca.pem
export HOTSPOT_KAFKA_TLS_CA=$s_tls/ca.pem
export HOTSPOT_REDIS_TLS_CA=$s_tls/ca.pem
export HOTSPOT_KAFKA_SASL=SCRAM-SHA-512
export HOTSPOT_KAFKA_USER=$S_KAFKA_USER
export HOTSPOT_KAFKA_PASSWORD=$S_KAFKA_PASSWORD
export HOTSPOT_ZK_DIGEST=$S_ZK_WRITER
export HOTSPOT_ZK_READERS=$S_ZK_APP
export HOTSPOT_ZK_APP_DIGEST=$S_ZK_APP
export HOTSPOT_REDIS_USER=$S_REDIS_USER
export HOTSPOT_REDIS_PASSWORD=$S_REDIS_PASSWORD
export HOTSPOT_CLUSTER_SECRET_FILE=$sstate/cluster.secret
EOF
}

secure_up() {
	mkdir -p "$sstate"
	install_debs
	secure_credentials
	. "$s_creds"
	secure_certs
	secure_zookeeper
	secure_redis
	secure_kafka
	for name in zookeeper redis kafka; do
		s_alive "$name" || die "$name exited at start; see $sstate/$name.log"
	done
	secure_probe -wait 120s -zk-protect-root || die "the secured stack did not answer in time; logs are in $sstate"
	log "secured stack up; state, certificates and credentials in $sstate"
	secure_env
}

secure_down() {
	local name
	for name in kafka redis zookeeper; do
		stop_one "$name" "$sstate" "secured $name"
	done
}

secure_status() {
	local name rc=0
	for name in zookeeper redis kafka; do
		if s_alive "$name"; then echo "secured $name: running (pid $(cat "$sstate/$name.pid"))"; else echo "secured $name: stopped"; rc=1; fi
	done
	. "$s_creds" 2>/dev/null || return 1
	((rc == 0)) && secure_probe -wait 5s >/dev/null && echo "all answer" || rc=1
	return $rc
}
