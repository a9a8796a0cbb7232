package kafkaio

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecurityFlags(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		tls     bool
		sasl    string
		wantErr string
	}{
		{"none", nil, nil, false, "", ""},
		{"tls on", []string{"--kafka-tls", "on"}, nil, true, "", ""},
		{"tls bad value", []string{"--kafka-tls", "maybe"}, nil, false, "", "want on or off"},
		{"missing CA file", []string{"--kafka-tls-ca", "/nonexistent/ca.pem"}, nil, false, "", "kafka TLS"},
		{"cert without key", []string{"--kafka-tls-cert", pw}, nil, false, "", "both"},
		{"scram from a file", []string{"--kafka-sasl", "SCRAM-SHA-512", "--kafka-user", "u", "--kafka-password-file", pw}, nil, false, "SCRAM-SHA-512", ""},
		{"plain from the environment", []string{"--kafka-sasl", "plain", "--kafka-user", "u"}, map[string]string{"HOTSPOT_KAFKA_PASSWORD": "p"}, false, "PLAIN", ""},
		{"scram-256 and tls", []string{"--kafka-sasl", "scram-sha-256", "--kafka-user", "u", "--kafka-tls", "on"}, map[string]string{"HOTSPOT_KAFKA_PASSWORD": "p"}, true, "SCRAM-SHA-256", ""},
		{"no password", []string{"--kafka-sasl", "PLAIN", "--kafka-user", "u"}, nil, false, "", "needs --kafka-user and a password"},
		{"two passwords", []string{"--kafka-sasl", "PLAIN", "--kafka-user", "u", "--kafka-password-file", pw}, map[string]string{"HOTSPOT_KAFKA_PASSWORD": "p"}, false, "", "give one of them"},
		{"unknown mechanism", []string{"--kafka-sasl", "GSSAPI", "--kafka-user", "u"}, map[string]string{"HOTSPOT_KAFKA_PASSWORD": "p"}, false, "", "unknown SASL mechanism"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := AddSecurityFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		s, err := f.Resolve(func(k string) string { return tt.env[k] })
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.wantErr)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		gotTLS, gotSASL := s != nil && s.TLS != nil, ""
		if s != nil && s.SASL != nil {
			gotSASL = s.SASL.Name()
		}
		if gotTLS != tt.tls || gotSASL != tt.sasl {
			t.Errorf("%s: TLS %v SASL %q, want %v %q", tt.name, gotTLS, gotSASL, tt.tls, tt.sasl)
		}
		if (s == nil) != (!tt.tls && tt.sasl == "") {
			t.Errorf("%s: Security %+v, want nil only for a plaintext client", tt.name, s)
		}
	}
}
