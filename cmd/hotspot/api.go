package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/hotspot-dev/hotspot/hotspotapi"
)

// apiClient returns the client of the /v1 API of the hotspotd at addr that
// sends token ("": none) with every call. When HOTSPOT_TLS_CA names a PEM
// CA bundle (stack.sh env --secure exports it), hotspotd serves HTTPS
// (--tls-cert): the client then talks HTTPS to a bare host:port and
// verifies hotspotd's certificate with that CA.
func apiClient(addr, token string) (*hotspotapi.Client, error) {
	hc, err := tlsClient()
	if err != nil {
		return nil, err
	}
	if hc != nil && !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	c, err := hotspotapi.NewClient(addr, hotspotapi.ClientConfig{HTTPClient: hc, AdminToken: token})
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// apiClients is apiClient for each of addrs, without a token.
func apiClients(addrs []string) ([]*hotspotapi.Client, error) {
	cs := make([]*hotspotapi.Client, 0, len(addrs))
	for _, a := range addrs {
		c, err := apiClient(a, "")
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// tlsClient is the HTTP client that verifies hotspotd with HOTSPOT_TLS_CA;
// nil without it.
var tlsClient = sync.OnceValues(func() (*http.Client, error) {
	ca := os.Getenv("HOTSPOT_TLS_CA")
	if ca == "" {
		return nil, nil
	}
	tc, err := caTLS(ca)
	if err != nil {
		return nil, fmt.Errorf("HOTSPOT_TLS_CA: %w", err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	return &http.Client{Transport: t}, nil
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

// apiError says what a failed call means to the user: how to reach a
// hotspotd, how to give the admin token.
func apiError(err error) error {
	if errors.Is(err, hotspotapi.ErrUnreachable) {
		return fmt.Errorf("%w: start one, or pass --hotspotd", err)
	}
	if e, ok := errors.AsType[*hotspotapi.Error](err); ok {
		switch e.Status {
		case http.StatusUnauthorized:
			return fmt.Errorf("hotspotd refused the admin token (give it with --admin-token, --admin-token-file or HOTSPOT_ADMIN_TOKEN): %s", e.Message)
		case http.StatusForbidden:
			return fmt.Errorf("hotspotd refuses admin calls: %s", e.Message)
		}
	}
	return err
}

// printJSON prints an answer as hotspotd writes it: indented by two spaces.
func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
