package clusterauth

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
)

// Transport returns a RoundTripper that signs each request with s and sends
// it through base (nil means http.DefaultTransport). A request body is read
// once to hash it (through GetBody when set, so it is not copied).
func (s *Signer) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{s: s, base: base}
}

type transport struct {
	s    *Signer
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	sum := emptyBodyHash[:]
	if req.Body != nil && req.Body != http.NoBody {
		var body io.ReadCloser
		var err error
		if req.GetBody != nil {
			body, err = req.GetBody()
		} else {
			// Read it here and hand the transport a copy.
			var b []byte
			b, err = io.ReadAll(req.Body)
			req.Body.Close()
			if err == nil {
				req = req.Clone(req.Context())
				req.Body = io.NopCloser(bytes.NewReader(b))
				body = io.NopCloser(bytes.NewReader(b))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("clusterauth: reading body to sign: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, body)
		body.Close()
		if err != nil {
			return nil, fmt.Errorf("clusterauth: reading body to sign: %w", err)
		}
		sum = h.Sum(nil)
	}
	src, ms, seq, sig := t.s.Headers(req.Method, req.URL.RequestURI(), sum)
	req = cloneHeaders(req) // a RoundTripper must not change the caller's request
	req.Header.Set(HeaderSource, src)
	req.Header.Set(HeaderTime, ms)
	req.Header.Set(HeaderSeq, seq)
	req.Header.Set(HeaderSignature, sig)
	return t.base.RoundTrip(req)
}

func cloneHeaders(req *http.Request) *http.Request {
	r := *req
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	return &r
}
