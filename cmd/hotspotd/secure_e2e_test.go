package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/clusterauth"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// secureStack is what `stack.sh env --secure` exports.
type secureStack struct {
	kafka, zk, redis      string
	ca                    string
	tlsConf               *tls.Config
	kafkaUser, kafkaPass  string
	zkWriter, zkApp       zkgroup.Digest
	redisUser, redisPass  string
	clusterSecretFile     string
	serverCert, serverKey string
	kafkaSec              *kafkaio.Security
	secret                []byte
}

func needSecureStack(t *testing.T) *secureStack {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test; -short skips it")
	}
	if os.Getenv("HOTSPOT_SECURE") != "1" {
		// make test runs it a second time, in the secured stack's
		// environment; the plain run skips it even under CI.
		t.Skip("needs the secured stack: eval \"$(deployments/local/stack.sh env --secure)\"")
	}
	s := &secureStack{
		kafka: os.Getenv("HOTSPOT_KAFKA"), zk: os.Getenv("HOTSPOT_ZK"), redis: os.Getenv("HOTSPOT_REDIS"),
		ca: os.Getenv("HOTSPOT_TLS_CA"), kafkaUser: os.Getenv("HOTSPOT_KAFKA_USER"), kafkaPass: os.Getenv("HOTSPOT_KAFKA_PASSWORD"),
		redisUser: os.Getenv("HOTSPOT_REDIS_USER"), redisPass: os.Getenv("HOTSPOT_REDIS_PASSWORD"),
		clusterSecretFile: os.Getenv("HOTSPOT_CLUSTER_SECRET_FILE"),
	}
	var err error
	if s.zkWriter, err = zkgroup.ParseDigest(os.Getenv("HOTSPOT_ZK_DIGEST")); err != nil {
		t.Fatal(err)
	}
	if s.zkApp, err = zkgroup.ParseDigest(os.Getenv("HOTSPOT_ZK_APP_DIGEST")); err != nil {
		t.Fatal(err)
	}
	if s.tlsConf, err = kafkaio.ClientTLS(s.ca, "", ""); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(s.ca)
	s.serverCert, s.serverKey = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	mech, err := kafkaio.NewSASL("SCRAM-SHA-512", s.kafkaUser, s.kafkaPass)
	if err != nil {
		t.Fatal(err)
	}
	s.kafkaSec = &kafkaio.Security{TLS: s.tlsConf, SASL: mech}
	b, err := os.ReadFile(s.clusterSecretFile)
	if err != nil {
		t.Fatal(err)
	}
	s.secret = bytes.TrimSpace(b)
	return s
}

// https returns a client of the secured hotspotd's HTTPS API.
func (s *secureStack) https() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: s.tlsConf}, Timeout: 5 * time.Second}
}

// secureRun is how a test starts hotspotd processes on the secured stack.
type secureRun struct {
	s                            *secureStack
	bin, dir, topic, group, root string
	tokenFile                    string
}

// start runs one hotspotd on the secured stack; the test's cleanup stops it.
func (r secureRun) start(t *testing.T, id string) *proc {
	t.Helper()
	s := r.s
	addr := freeAddr(t)
	logf, _ := os.Create(filepath.Join(r.dir, id+".log"))
	// The environment carries the Kafka, ZooKeeper and cluster
	// credentials (HOTSPOT_KAFKA_*, HOTSPOT_ZK_DIGEST, ...).
	cmd := exec.Command(r.bin, "--brokers", s.kafka, "--zk", s.zk, "--topic", r.topic, "--group", r.group,
		"--zk-root", r.root, "--http-addr", addr, "--id", id, "--from-oldest=true", "--threshold", "500",
		"--admin-token-file", r.tokenFile, "--tls-cert", s.serverCert, "--tls-key", s.serverKey, "--tls-ca", s.ca)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = diesWithTest
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, addr: addr, id: id, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("log of %s:\n%s", id, b)
		}
	})
	https := s.https()
	waitFor(t, 60*time.Second, id+" ready over HTTPS", func() bool {
		resp, err := https.Get("https://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// TestSecureStack: on the secured stack the whole pipeline works (SDK
// reports through SASL_SSL, hotspotd detects, signs its internal calls over
// HTTPS, publishes under ACLs, the SDK reads the hot set as an app identity
// and promotes the key), and every unauthenticated or wrongly
// authenticated client is refused.
func TestSecureStack(t *testing.T) {
	s := needSecureStack(t)
	name := stacktest.Name(t)
	topic, root, dir := name, "/"+name, t.TempDir()
	bin := filepath.Join(dir, "hotspotd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kafkaio.EnsureTopicWith(ctx, s.kafkaSec, []string{s.kafka}, topic, 4); err != nil {
		t.Fatal(err)
	}
	writer := dialZK(t, s.zk, s.zkWriter)
	t.Cleanup(func() { deleteTree(writer, root) })
	tokenFile := filepath.Join(dir, "admin.token")
	os.WriteFile(tokenFile, []byte("secure-admin-token\n"), 0o600)

	https := s.https()
	run := secureRun{s: s, bin: bin, dir: dir, topic: topic, group: name, root: root, tokenFile: tokenFile}
	start := func(id string) *proc { return run.start(t, id) }
	p1 := start("s1")
	start("s2")

	// The pipeline: a producer with SCRAM over TLS makes a flash crowd; an
	// SDK instance (ZooKeeper as the app identity, Redis with its ACL user
	// over TLS, reporting through SASL_SSL) promotes the key.
	app, err := hotcache.New(ctx, hotcache.WithApp("shop"), hotcache.WithZooKeeper([]string{s.zk}, root),
		hotcache.WithZooKeeperAuth(s.zkApp.User, s.zkApp.Password),
		hotcache.WithRedis(s.redis), hotcache.WithRedisAuth(s.redisUser, s.redisPass), hotcache.WithRedisTLS(s.tlsConf),
		hotcache.WithTimeout(2*time.Second), // a TLS handshake under the race detector on a loaded machine
		hotcache.WithKafka([]string{s.kafka}, topic), hotcache.WithKafkaTLS(s.tlsConf),
		hotcache.WithKafkaSASL("SCRAM-SHA-512", s.kafkaUser, s.kafkaPass),
		hotcache.WithLoader(hotcache.LoaderFunc(func(context.Context, string) ([]byte, error) { return []byte("v"), nil })))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if _, err := app.Get(ctx, "item:warm"); err != nil {
		t.Fatalf("SDK Get through Redis (TLS, ACL user): %v", err)
	}
	// Get falls back to the Loader when Redis fails; an invalidation
	// reports it.
	if err := app.Invalidate(ctx, "item:warm"); err != nil {
		t.Fatalf("SDK Invalidate through Redis (TLS, ACL user): %v", err)
	}
	prod := newProducer(t, s.kafka, topic, true)
	prod.w.Transport = s.kafkaSec.Transport()
	pctx, stopProd := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { prod.run(pctx, t, map[string]float64{"item:flash": 2000}, 500) })
	waitFor(t, 60*time.Second, "the SDK to promote item:flash", func() bool {
		for _, k := range app.Hot() {
			if k.Key == "item:flash" && k.Loaded {
				return true
			}
		}
		return false
	})
	stopProd()
	wg.Wait()
	if crossed, ok := prod.crossing("item:flash", 500); ok {
		t.Logf("secured stack: promotion within %v of the true crossing", time.Since(crossed))
	}
	// The promotion reaches the history in Redis (TLS, ACL user:
	// --redis-user, HOTSPOT_REDIS_PASSWORD, --redis-tls-ca).
	waitFor(t, 30*time.Second, "item:flash in the history", func() bool {
		resp, err := https.Get("https://" + p1.addr + "/v1/history?app=shop&key=item:flash")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var res hotspotapi.History
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&res) == nil && len(res.Events) > 0
	})
	t.Cleanup(func() {
		rdb := redis.NewClient(&redis.Options{Addr: s.redis, TLSConfig: s.tlsConf, Username: s.redisUser, Password: s.redisPass})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if keys, _ := rdb.Keys(ctx, "hotspot:history:"+root+"/*").Result(); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})

	// Each refusal, with its own assertion.
	t.Run("kafka without credentials", func(t *testing.T) {
		for _, d := range []*kafka.Dialer{
			{Timeout: 3 * time.Second},                 // plaintext to a TLS port
			{Timeout: 3 * time.Second, TLS: s.tlsConf}, // TLS, no SASL
		} {
			conn, err := d.DialContext(ctx, "tcp", s.kafka)
			if err == nil {
				conn.SetDeadline(time.Now().Add(3 * time.Second))
				_, err = conn.ReadPartitions(topic)
				conn.Close()
			}
			if err == nil {
				t.Errorf("a client without credentials (TLS %v) read the topic's metadata", d.TLS != nil)
			}
		}
	})
	t.Run("kafka with wrong credentials", func(t *testing.T) {
		mech, _ := scram.Mechanism(scram.SHA512, s.kafkaUser, "wrong-password")
		d := &kafka.Dialer{Timeout: 3 * time.Second, TLS: s.tlsConf, SASLMechanism: mech}
		conn, err := d.DialContext(ctx, "tcp", s.kafka)
		if err == nil {
			conn.Close()
			t.Fatal("SCRAM with a wrong password connected")
		}
		if !strings.Contains(err.Error(), "SASL") && !strings.Contains(err.Error(), "uthentication") {
			t.Logf("refused with %v", err)
		}
	})
	hotNode := hotset.ShardPath(root, "shop", "s1")
	if _, _, err := writer.Get(ctx, hotNode); err != nil {
		hotNode = hotset.ShardPath(root, "shop", "s2")
	}
	nodes := map[string]string{
		"hot set": hotNode,
		"pins":    hotset.PinsPath(root, "shop"),
		"members": hotset.AggregatorsDir(root) + "/s1",
	}
	t.Run("zookeeper without auth", func(t *testing.T) {
		anon := dialZK(t, s.zk, zkgroup.Digest{})
		for what, p := range nodes {
			err := anon.Create(ctx, p+"-rogue", []byte("{}"))
			if err == nil {
				t.Errorf("unauthenticated create next to the %s succeeded", what)
			}
			if err := anon.Set(ctx, p, []byte("{}"), -1); err == nil {
				t.Errorf("unauthenticated write of the %s succeeded", what)
			}
		}
		if err := anon.Create(ctx, root+"/rogue", nil); err == nil {
			t.Errorf("unauthenticated create under the root succeeded")
		}
	})
	t.Run("app identity writing", func(t *testing.T) {
		appConn := dialZK(t, s.zk, s.zkApp)
		for what, p := range nodes {
			if _, _, err := appConn.Get(ctx, hotset.HotDir(root)); err != nil {
				t.Fatalf("the app identity cannot read the hot set: %v", err)
			}
			if err := appConn.Set(ctx, p, []byte("{}"), -1); !errors.Is(err, zk.ErrNoAuth) && !errors.Is(err, zk.ErrNoNode) {
				t.Errorf("app identity write of the %s: %v, want ErrNoAuth", what, err)
			}
			if err := appConn.Create(ctx, p+"-rogue", []byte("{}")); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("app identity create next to the %s: %v, want ErrNoAuth", what, err)
			}
		}
	})
	t.Run("redis without a password", func(t *testing.T) {
		for _, opt := range []*redis.Options{
			{Addr: s.redis, TLSConfig: s.tlsConf, MaxRetries: -1},                                           // TLS, no password
			{Addr: s.redis, TLSConfig: s.tlsConf, Username: s.redisUser, Password: "wrong", MaxRetries: -1}, // wrong password
			{Addr: s.redis, MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second},     // plaintext
		} {
			c := redis.NewClient(opt)
			err := c.Set(ctx, "rogue", "x", time.Minute).Err()
			c.Close()
			if err == nil {
				t.Errorf("Redis SET without valid credentials (TLS %v, user %q) succeeded", opt.TLSConfig != nil, opt.Username)
			}
		}
	})
	partials := "https://" + p1.addr + "/internal/v1/partials"
	batch := wire.AppendPartials(nil, &wire.PartialBatch{Source: "attacker", At: time.Now().UnixMilli(),
		Groups: []wire.PartialGroup{{App: "shop", Entries: []wire.KeyCount{{Key: "item:evil", Count: 1 << 62}}}}})
	post := func(t *testing.T, rt http.RoundTripper, hdr http.Header) int {
		req, _ := http.NewRequest("POST", partials, bytes.NewReader(batch))
		req.Header.Set("Content-Type", "application/octet-stream")
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := (&http.Client{Transport: rt, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Run("unsigned partials", func(t *testing.T) {
		if code := post(t, https.Transport, nil); code != http.StatusUnauthorized {
			t.Errorf("unsigned POST = %d, want 401", code)
		}
	})
	t.Run("wrongly signed partials", func(t *testing.T) {
		wrong, _ := clusterauth.NewSigner([]byte("not-the-cluster-secret-at-all"), "attacker")
		if code := post(t, wrong.Transport(https.Transport), nil); code != http.StatusUnauthorized {
			t.Errorf("POST signed with another secret = %d, want 401", code)
		}
	})
	t.Run("replayed partials", func(t *testing.T) {
		good, _ := clusterauth.NewSigner(s.secret, "e2e")
		var captured http.Header
		capture := good.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			captured = r.Header.Clone()
			return https.Transport.RoundTrip(r)
		}))
		if code := post(t, capture, nil); code != http.StatusNoContent {
			t.Fatalf("signed POST = %d, want 204", code)
		}
		if code := post(t, https.Transport, captured); code != http.StatusUnauthorized {
			t.Errorf("replayed POST = %d, want 401", code)
		}
	})
	t.Run("admin write without the token", func(t *testing.T) {
		req, _ := http.NewRequest("PUT", "https://"+p1.addr+"/v1/pins/item:x?app=shop", nil)
		resp, err := https.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("PUT pin without token = %d, want 401", resp.StatusCode)
		}
		req, _ = http.NewRequest("PUT", "https://"+p1.addr+"/v1/pins/item:x?app=shop", nil)
		req.Header.Set("Authorization", "Bearer secure-admin-token")
		resp, err = https.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("PUT pin with the token from --admin-token-file = %d, want 204", resp.StatusCode)
		}
	})
}

func dialZK(t *testing.T, addr string, auth zkgroup.Digest) *zkgroup.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{addr}, zkgroup.Config{Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func deleteTree(s *zkgroup.Session, p string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var del func(p string)
	del = func(p string) {
		kids, _ := s.Children(ctx, p)
		for _, k := range kids {
			del(p + "/" + k)
		}
		s.Delete(ctx, p, -1)
	}
	del(p)
}
