package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"sync"
)

// hotspotdClient is how the CLI reaches hotspotd's HTTP API and metrics.
// When HOTSPOT_TLS_CA names a PEM CA bundle (stack.sh env --secure exports
// it), hotspotd serves HTTPS (--tls-cert): the CLI then talks HTTPS and
// verifies hotspotd's certificate with that CA.
var hotspotdClient = sync.OnceValues(func() (*http.Client, error) {
	ca := os.Getenv("HOTSPOT_TLS_CA")
	if ca == "" {
		return http.DefaultClient, nil
	}
	tc, err := caTLS(ca)
	if err != nil {
		return nil, fmt.Errorf("HOTSPOT_TLS_CA: %w", err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	return &http.Client{Transport: httpsOnly{t}}, nil
})

// caTLS is a TLS client configuration that verifies servers with the PEM CA
// bundle in the file ca.
func caTLS(ca string) (*tls.Config, error) {
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", ca)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// httpsOnly sends every request over HTTPS.
type httpsOnly struct{ base http.RoundTripper }

func (h httpsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" {
		u := *r.URL
		u.Scheme = "https"
		c := *r
		c.URL = &u
		r = &c
	}
	return h.base.RoundTrip(r)
}
