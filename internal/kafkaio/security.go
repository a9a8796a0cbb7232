package kafkaio

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Security is how a Kafka client proves itself and protects the wire: TLS
// (nil: plaintext) and SASL (nil: none). The zero value, or a nil
// *Security, is a plaintext, unauthenticated client.
type Security struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// NewSASL returns the SASL mechanism named ("PLAIN", "SCRAM-SHA-256",
// "SCRAM-SHA-512", any case) for user and password; nil for "".
func NewSASL(mechanism, user, password string) (sasl.Mechanism, error) {
	switch strings.ToUpper(mechanism) {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Mechanism{Username: user, Password: password}, nil
	case "SCRAM-SHA-256":
		return scram.Mechanism(scram.SHA256, user, password)
	case "SCRAM-SHA-512":
		return scram.Mechanism(scram.SHA512, user, password)
	}
	return nil, fmt.Errorf("kafkaio: unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", mechanism)
}

// Dialer returns a kafka-go Dialer with s's TLS and SASL.
func (s *Security) Dialer(timeout time.Duration) *kafka.Dialer {
	d := &kafka.Dialer{Timeout: timeout, DualStack: true}
	if s != nil {
		d.TLS, d.SASLMechanism = s.TLS, s.SASL
	}
	return d
}

// Transport returns a kafka-go Transport with s's TLS and SASL (for Writer
// and Client); nil, kafka-go's default, for a plaintext client.
func (s *Security) Transport() kafka.RoundTripper {
	if s == nil || (s.TLS == nil && s.SASL == nil) {
		return nil
	}
	return &kafka.Transport{TLS: s.TLS, SASL: s.SASL}
}

// SecurityFlags are the Kafka security flags a command registers with
// AddSecurityFlags. The password is never a flag (it would show in ps):
// it comes from the variable HOTSPOT_KAFKA_PASSWORD or --kafka-password-file.
type SecurityFlags struct {
	tls, ca, cert, key, mech, user, pwFile *string
	insecure                               *bool
}

// AddSecurityFlags registers --kafka-tls, --kafka-tls-ca, --kafka-tls-cert,
// --kafka-tls-key, --kafka-tls-insecure, --kafka-sasl, --kafka-user and
// --kafka-password-file on fs.
func AddSecurityFlags(fs *flag.FlagSet) *SecurityFlags {
	return &SecurityFlags{
		tls:      fs.String("kafka-tls", "", `"on" to talk TLS to Kafka (implied by --kafka-tls-ca or --kafka-tls-cert)`),
		ca:       fs.String("kafka-tls-ca", "", "PEM CA bundle that verifies the brokers (default: the system roots)"),
		cert:     fs.String("kafka-tls-cert", "", "PEM client certificate for Kafka (with --kafka-tls-key)"),
		key:      fs.String("kafka-tls-key", "", "PEM private key of --kafka-tls-cert"),
		insecure: fs.Bool("kafka-tls-insecure", false, "do not verify the brokers' certificates (tests only)"),
		mech:     fs.String("kafka-sasl", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default none)"),
		user:     fs.String("kafka-user", "", "SASL user name"),
		pwFile:   fs.String("kafka-password-file", "", "file holding the SASL password (or set HOTSPOT_KAFKA_PASSWORD)"),
	}
}

// Resolve builds the Security the flags describe; getenv supplies
// HOTSPOT_KAFKA_PASSWORD. No flag set: nil, a plaintext client.
func (f *SecurityFlags) Resolve(getenv func(string) string) (*Security, error) {
	var s Security
	useTLS := *f.ca != "" || *f.cert != "" || *f.insecure
	switch strings.ToLower(*f.tls) {
	case "", "off", "false":
	case "on", "true":
		useTLS = true
	default:
		return nil, fmt.Errorf("--kafka-tls: %q, want on or off", *f.tls)
	}
	if useTLS {
		tc, err := ClientTLS(*f.ca, *f.cert, *f.key)
		if err != nil {
			return nil, fmt.Errorf("kafka TLS: %w", err)
		}
		tc.InsecureSkipVerify = *f.insecure
		s.TLS = tc
	}
	if *f.mech != "" {
		pw := getenv("HOTSPOT_KAFKA_PASSWORD")
		if *f.pwFile != "" {
			if pw != "" {
				return nil, errors.New("--kafka-password-file and HOTSPOT_KAFKA_PASSWORD: give one of them")
			}
			b, err := os.ReadFile(*f.pwFile)
			if err != nil {
				return nil, fmt.Errorf("--kafka-password-file: %w", err)
			}
			pw = strings.TrimRight(string(b), "\r\n")
		}
		if *f.user == "" || pw == "" {
			return nil, errors.New("--kafka-sasl needs --kafka-user and a password (--kafka-password-file or HOTSPOT_KAFKA_PASSWORD)")
		}
		m, err := NewSASL(*f.mech, *f.user, pw)
		if err != nil {
			return nil, err
		}
		s.SASL = m
	}
	if s.TLS == nil && s.SASL == nil {
		return nil, nil
	}
	return &s, nil
}

// ClientTLS returns a TLS client configuration that trusts the CA bundle in
// caFile ("" means the system roots) and presents the certificate in
// certFile/keyFile (both "" means none).
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no PEM certificate in %s", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both the certificate and the key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
