package main

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/clusterauth"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// security is hotspotd's part of the trust boundary (docs/security.md): the
// cluster secret that signs hotspotd-to-hotspotd calls, the admin token, and
// TLS for the HTTP server and the internal clients.
type security struct {
	clusterSecret []byte   // nil runs an open cluster bound to loopback
	olderSecrets  [][]byte // still accepted (rotation): the secret file's later lines
	tlsCert       string   // PEM files; both or neither
	tlsKey        string
	tlsCA         string            // PEM CA bundle that verifies other hotspotds; "" means the system roots
	zkAuth        zkgroup.Digest    // HOTSPOT_ZK_DIGEST[_FILE]; zero: no auth, open nodes
	zkReaders     []zkgroup.Digest  // HOTSPOT_ZK_READERS: app identities that may read; empty: anyone may read
	kafka         *kafkaio.Security // nil: plaintext, no SASL
	redisPassword string            // HOTSPOT_REDIS_PASSWORD: of --redis-user, for the history's Redis
}

// securityFlags registers the security flags on fs; resolve reads them once
// fs is parsed and the environment applied.
type securityFlags struct {
	secretFile, adminTokenFile, tlsCert, tlsKey, tlsCA *string
	kafka                                              *kafkaio.SecurityFlags
}

func addSecurityFlags(fs *flag.FlagSet) securityFlags {
	return securityFlags{
		secretFile: fs.String("cluster-secret-file", "",
			"file holding the cluster secret (at least 16 bytes) that signs every hotspotd-to-hotspotd call, on its first line; "+
				"later lines are older secrets still accepted during a rotation. HOTSPOT_CLUSTER_SECRET may hold the secret itself. Without one the cluster is open and hotspotd binds loopback only"),
		adminTokenFile: fs.String("admin-token-file", "",
			"file holding the admin token (instead of --admin-token, so it never shows in ps)"),
		tlsCert: fs.String("tls-cert", "", "PEM certificate chain: serve HTTPS (with --tls-key), and call other hotspotd over HTTPS"),
		tlsKey:  fs.String("tls-key", "", "PEM private key of --tls-cert"),
		tlsCA:   fs.String("tls-ca", "", "PEM CA bundle that verifies other hotspotd's certificates (default: the system roots)"),
		kafka:   kafkaio.AddSecurityFlags(fs),
	}
}

// readSecretFile reads a secret from a file, without its trailing newline.
func readSecretFile(flagName, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	if len(b) == 0 {
		return nil, fmt.Errorf("--%s: %s is empty", flagName, path)
	}
	return b, nil
}

// resolve reads the files and checks the combinations. adminToken is the
// --admin-token value; the token in effect is returned.
func (f securityFlags) resolve(getenv func(string) string, adminToken string) (security, string, error) {
	var s security
	envSecret := getenv("HOTSPOT_CLUSTER_SECRET")
	switch {
	case *f.secretFile != "" && envSecret != "":
		return s, "", errors.New("--cluster-secret-file and HOTSPOT_CLUSTER_SECRET: give one of them")
	case *f.secretFile != "":
		b, err := readSecretFile("cluster-secret-file", *f.secretFile)
		if err != nil {
			return s, "", err
		}
		// The first line signs; later lines are older secrets that are
		// still accepted while a rotation rolls through the cluster.
		lines := strings.Split(string(b), "\n")
		s.clusterSecret = []byte(strings.TrimRight(lines[0], "\r"))
		for _, l := range lines[1:] {
			if l = strings.TrimRight(l, "\r"); l != "" {
				s.olderSecrets = append(s.olderSecrets, []byte(l))
			}
		}
	case envSecret != "":
		s.clusterSecret = []byte(envSecret)
	}
	for _, secret := range append([][]byte{s.clusterSecret}, s.olderSecrets...) {
		if s.clusterSecret != nil && len(secret) < clusterauth.MinSecretLen {
			return s, "", fmt.Errorf("cluster secret: %d bytes, want at least %d", len(secret), clusterauth.MinSecretLen)
		}
	}
	if *f.adminTokenFile != "" {
		if adminToken != "" {
			return s, "", errors.New("--admin-token and --admin-token-file: give one of them")
		}
		b, err := readSecretFile("admin-token-file", *f.adminTokenFile)
		if err != nil {
			return s, "", err
		}
		adminToken = string(b)
	}
	if (*f.tlsCert == "") != (*f.tlsKey == "") {
		return s, "", errors.New("--tls-cert and --tls-key go together")
	}
	s.tlsCert, s.tlsKey, s.tlsCA = *f.tlsCert, *f.tlsKey, *f.tlsCA
	var err error
	if s.zkAuth, err = zkgroup.DigestFromEnv(getenv, "HOTSPOT_ZK_DIGEST"); err != nil {
		return s, "", err
	}
	for _, r := range strings.Split(getenv("HOTSPOT_ZK_READERS"), ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		d, err := zkgroup.ParseDigest(r)
		if err != nil {
			return s, "", fmt.Errorf("HOTSPOT_ZK_READERS: %w", err)
		}
		s.zkReaders = append(s.zkReaders, d)
	}
	s.redisPassword = getenv("HOTSPOT_REDIS_PASSWORD")
	if s.kafka, err = f.kafka.Resolve(getenv); err != nil {
		return s, "", err
	}
	if len(s.zkReaders) > 0 && s.zkAuth.IsZero() {
		return s, "", errors.New("HOTSPOT_ZK_READERS needs HOTSPOT_ZK_DIGEST: readers are only enforced on nodes hotspotd owns")
	}
	return s, adminToken, nil
}

// isLoopback reports whether host (of a listen address) only listens on
// loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openCluster confines an open cluster (no secret) to loopback: a wildcard or
// external --http-addr is replaced by 127.0.0.1 with the same port. It
// returns the address to listen on and whether it changed it.
func openCluster(httpAddr string) (string, bool) {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil || isLoopback(host) {
		return httpAddr, false
	}
	return net.JoinHostPort("127.0.0.1", port), true
}

// serverTLS loads the server certificate; nil without one.
func (s security) serverTLS() (*tls.Config, error) {
	if s.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// clientTLS is the TLS configuration the internal clients dial other
// hotspotd with; nil without --tls-cert.
func (s security) clientTLS() (*tls.Config, error) {
	if s.tlsCert == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no certificate in %s", s.tlsCA)
		}
	}
	return c, nil
}

// pprofHandler serves Go's profiler to loopback clients and, from anywhere
// else, only with the admin token (Authorization: Bearer TOKEN); with no
// admin token, to loopback only.
func pprofHandler(adminToken string, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			mux.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		if adminToken == "" || !strings.HasPrefix(auth, "Bearer ") ||
			subtle.ConstantTimeCompare([]byte(strings.TrimPrefix(auth, "Bearer ")), []byte(adminToken)) != 1 {
			log.Warn("pprof refused", "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="hotspot"`)
			http.Error(w, `{"error":"pprof: loopback only, or the admin token"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// clusterAPI is how this process's aggregator client (the detector's
// partial sender and the API's fan-out) reaches other hotspotd: over HTTPS
// when this cluster serves TLS, signed when it has a secret. guard is the
// middleware that checks those signatures on the internal routes. It says
// loudly when the cluster is open.
func clusterAPI(cfg config, log *slog.Logger, reg prometheus.Registerer) (tlsConf *tls.Config, wrap func(http.RoundTripper) http.RoundTripper, guard func(http.Handler) http.Handler, err error) {
	if tlsConf, err = cfg.sec.clientTLS(); err != nil {
		return nil, nil, nil, err
	}
	if cfg.sec.clusterSecret == nil {
		log.Warn("CLUSTER IS OPEN: no cluster secret (--cluster-secret-file or HOTSPOT_CLUSTER_SECRET), so anyone "+
			"who reaches this port can send partial counts and make keys hot; serving on loopback only",
			"http", cfg.httpAddr, "asked", cfg.rebound)
		return tlsConf, nil, func(h http.Handler) http.Handler { return h }, nil
	}
	signer, err := clusterauth.NewSigner(cfg.sec.clusterSecret, cfg.id)
	if err != nil {
		return nil, nil, nil, err
	}
	v, err := clusterauth.NewVerifier(cfg.sec.clusterSecret, clusterauth.Config{Logger: log, Registerer: reg}, cfg.sec.olderSecrets...)
	if err != nil {
		return nil, nil, nil, err
	}
	return tlsConf, signer.Transport, v.Wrap, nil
}

// zkConfig is hotspotd's ZooKeeper identity and the ACL of every node it
// creates: its own identity writes, the app identities (or anyone) read.
func (s security) zkConfig(c zkgroup.Config) zkgroup.Config {
	c.Auth = s.zkAuth
	c.ACL = zkgroup.ACL{Writer: s.zkAuth, Readers: s.zkReaders}
	return c
}

// redisOptions adds the history Redis's identity and TLS to opts: the ACL
// user and password when given, and TLS verified with --redis-tls-ca.
func (c config) redisOptions(opts *redis.Options) error {
	if c.redisUser != "" {
		opts.Username = c.redisUser
	}
	if c.sec.redisPassword != "" {
		opts.Password = c.sec.redisPassword
	}
	if c.redisTLSCA != "" {
		tc, err := kafkaio.ClientTLS(c.redisTLSCA, "", "")
		if err != nil {
			return fmt.Errorf("--redis-tls-ca: %w", err)
		}
		if opts.TLSConfig != nil { // rediss://
			tc.ServerName = opts.TLSConfig.ServerName
		}
		opts.TLSConfig = tc
	}
	return nil
}
