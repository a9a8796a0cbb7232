// Command probe checks that the local stack answers real requests: a Kafka
// metadata request and a group on every partition of __consumer_offsets, a
// ZooKeeper session and a Redis PING. stack.sh runs it.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/hotspot-dev/hotspot/internal/liblog"
)

func main() {
	kafkaAddr := flag.String("kafka", "127.0.0.1:19092", "Kafka broker addresses, comma-separated: each is probed")
	zkAddr := flag.String("zk", "127.0.0.1:12181", "ZooKeeper server addresses, comma-separated: each is probed")
	flag.IntVar(&minBrokers, "brokers", 1, "how many brokers the Kafka metadata must list (a cluster has formed)")
	redisAddr := flag.String("redis", "127.0.0.1:16379", "Redis address")
	wait := flag.Duration("wait", 60*time.Second, "how long to keep trying")
	// The secured stack (stack.sh up --secure): each service is probed with
	// the credentials clients use.
	flag.StringVar(&sec.ca, "ca", "", "PEM CA of the secured stack: Kafka and Redis are probed over TLS")
	flag.StringVar(&sec.kafkaUser, "kafka-user", "", "SCRAM-SHA-512 user for Kafka")
	flag.StringVar(&sec.kafkaPassword, "kafka-password", "", "its password")
	flag.StringVar(&sec.zkDigest, "zk-digest", "", "ZooKeeper digest identity user:password")
	flag.BoolVar(&sec.zkProtectRoot, "zk-protect-root", false, "set the ACL of / so that only -zk-digest creates nodes there")
	flag.StringVar(&sec.redisUser, "redis-user", "", "Redis ACL user")
	flag.StringVar(&sec.redisPassword, "redis-password", "", "its password")
	flag.Parse()
	liblog.Route(nil) // go-redis's own lines; the probe reports each failure itself

	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	type check struct {
		name string
		fn   func(context.Context) error
	}
	var checks []check
	for _, a := range strings.Split(*zkAddr, ",") {
		checks = append(checks, check{"zookeeper " + a, func(ctx context.Context) error { return probeZK(ctx, a) }})
	}
	checks = append(checks, check{"redis " + *redisAddr, func(ctx context.Context) error { return probeRedis(ctx, *redisAddr) }})
	for _, a := range strings.Split(*kafkaAddr, ",") {
		checks = append(checks, check{"kafka " + a, func(ctx context.Context) error { return probeKafka(ctx, a) }})
	}
	for _, c := range checks {
		if err := retry(ctx, c.fn); err != nil {
			fmt.Fprintf(os.Stderr, "probe: %s does not answer: %v\n", c.name, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "probe: %s answers\n", c.name)
	}
}

func retry(ctx context.Context, fn func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := fn(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// sec holds the secured stack's credentials; zero for the plain stack.
var sec struct {
	ca                       string
	kafkaUser, kafkaPassword string
	zkDigest                 string
	zkProtectRoot            bool
	redisUser, redisPassword string
}

func tlsConfig() (*tls.Config, error) {
	if sec.ca == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(sec.ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", sec.ca)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// minBrokers is how many brokers a Kafka metadata answer must list.
var minBrokers = 1

func probeKafka(ctx context.Context, addr string) error {
	d := &kafka.Dialer{Timeout: 2 * time.Second}
	var err error
	if d.TLS, err = tlsConfig(); err != nil {
		return err
	}
	if sec.kafkaUser != "" {
		if d.SASLMechanism, err = scram.Mechanism(scram.SHA512, sec.kafkaUser, sec.kafkaPassword); err != nil {
			return err
		}
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	brokers, err := conn.Brokers()
	if err != nil {
		return err
	}
	if len(brokers) < minBrokers {
		return fmt.Errorf("metadata lists %d brokers, want %d", len(brokers), minBrokers)
	}
	if _, err = conn.Controller(); err != nil {
		return err
	}
	// A consumer group needs a coordinator, which a fresh broker has only
	// once it has created its offsets topic: the first FindCoordinator
	// starts that, and the probe waits for it, so that the first group of
	// a test does not meet "Group Coordinator Not Available".
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 2 * time.Second}
	if d.TLS != nil || d.SASLMechanism != nil {
		client.Transport = &kafka.Transport{TLS: d.TLS, SASL: d.SASLMechanism}
	}
	resp, err := client.FindCoordinator(ctx,
		&kafka.FindCoordinatorRequest{Key: "hotspot-stack-probe", KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("no group coordinator yet: %w", resp.Error)
	}
	// A restarted broker names coordinators at once but loads the groups
	// of __consumer_offsets one partition after another, and refuses a
	// group whose partition is still loading ("Group Load In Progress"):
	// seconds on a slow machine. So the probe asks for a group on every
	// partition, and the stack is up once all of them are served.
	parts, err := conn.ReadPartitions("__consumer_offsets")
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return errors.New("__consumer_offsets has no partitions yet")
	}
	groups, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: groupsCovering(len(parts))})
	if err != nil {
		return err
	}
	for _, g := range groups.Groups {
		if g.Error != nil {
			return fmt.Errorf("group %s: %w", g.GroupID, g.Error)
		}
	}
	return nil
}

// groupsCovering returns group IDs whose groups lie on every one of the n
// partitions of __consumer_offsets: Kafka puts a group on partition
// abs(Java's hashCode of its ID) mod n.
func groupsCovering(n int) []string {
	var ids []string
	seen := make([]bool, n)
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("hotspot-stack-probe-%d", i)
		if p := groupPartition(id, n); !seen[p] {
			seen[p] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// groupPartition is the partition of __consumer_offsets (of n) that holds
// group id (Kafka's Utils.abs(id.hashCode()) % n, for an ASCII id).
func groupPartition(id string, n int) int {
	var h int32
	for i := range len(id) {
		h = 31*h + int32(id[i])
	}
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return int(h) % n
}

func probeZK(ctx context.Context, addr string) error {
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		return (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, address)
	}
	// go-zookeeper's default logger would print every failed attempt
	// ("authentication failed: EOF" while ZooKeeper starts); the probe
	// reports the last error itself.
	conn, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithDialer(dialer), zk.WithLogInfo(false),
		zk.WithLogger(liblog.NewPrinter(nil, "go-zookeeper")))
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				if sec.zkDigest != "" {
					if err := conn.AddAuth("digest", []byte(sec.zkDigest)); err != nil {
						return err
					}
				}
				if _, _, err := conn.Exists("/"); err != nil {
					return err
				}
				if sec.zkProtectRoot {
					// Only the writer identity creates nodes at the top;
					// authenticated clients may list it.
					user, pw, _ := strings.Cut(sec.zkDigest, ":")
					acl := append(zk.DigestACL(zk.PermAll, user, pw), zk.WorldACL(zk.PermRead)...)
					if _, err := conn.SetACL("/", acl, -1); err != nil {
						return fmt.Errorf("set the ACL of /: %w", err)
					}
				}
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func probeRedis(ctx context.Context, addr string) error {
	tc, err := tlsConfig()
	if err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, TLSConfig: tc,
		Username: sec.redisUser, Password: sec.redisPassword})
	defer c.Close()
	return c.Ping(ctx).Err()
}
