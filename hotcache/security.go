package hotcache

import (
	"crypto/tls"
	"fmt"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// secOptions are the SDK's credentials (docs/security.md). An app only ever
// reads ZooKeeper, writes access events to Kafka and reads and writes its
// own Redis keys.
type secOptions struct {
	zkAuth zkgroup.Digest

	kafkaTLS      *tls.Config
	kafkaSASL     string // "", "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512" (any case)
	kafkaUser     string
	kafkaPassword string

	redisUser     string
	redisPassword string
	redisTLS      *tls.Config
}

// WithZooKeeperAuth authenticates the SDK's ZooKeeper session with a digest
// identity (user:password). Use it when hotspotd protects the hot set with
// ACLs that name app identities as readers; the app never needs write access.
func WithZooKeeperAuth(user, password string) Option {
	return func(o *options) { o.sec.zkAuth = zkgroup.Digest{User: user, Password: password} }
}

// WithKafkaTLS makes the reporter talk TLS to the brokers with cfg: set
// RootCAs for a private CA and Certificates for a client certificate.
func WithKafkaTLS(cfg *tls.Config) Option { return func(o *options) { o.sec.kafkaTLS = cfg } }

// WithKafkaSASL authenticates the reporter with SASL: mechanism "PLAIN",
// "SCRAM-SHA-256" or "SCRAM-SHA-512". Combine it with WithKafkaTLS unless the
// network is trusted: PLAIN sends the password as it is.
func WithKafkaSASL(mechanism, user, password string) Option {
	return func(o *options) {
		o.sec.kafkaSASL, o.sec.kafkaUser, o.sec.kafkaPassword = mechanism, user, password
	}
}

// WithRedisAuth sets the Redis ACL user and password (user "" means the
// default user, i.e. requirepass). It applies to the clients WithRedis
// builds, not to one given with WithRedisClient.
func WithRedisAuth(user, password string) Option {
	return func(o *options) { o.sec.redisUser, o.sec.redisPassword = user, password }
}

// WithRedisTLS makes the clients WithRedis builds talk TLS with cfg.
func WithRedisTLS(cfg *tls.Config) Option { return func(o *options) { o.sec.redisTLS = cfg } }

// kafkaTransport returns the reporter's transport for topic, one of its own
// (kafkaio.WriterTransport).
func (s secOptions) kafkaTransport(topic string) (*kafkaio.Transport, error) {
	mech, err := kafkaio.NewSASL(s.kafkaSASL, s.kafkaUser, s.kafkaPassword)
	if err != nil {
		return nil, fmt.Errorf("hotcache: WithKafkaSASL: %w", err)
	}
	return (&kafkaio.Security{TLS: s.kafkaTLS, SASL: mech}).WriterTransport(topic), nil
}
