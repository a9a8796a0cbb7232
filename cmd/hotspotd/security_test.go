package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecurityConfig(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secretFile := file("secret", "0123456789abcdef0123\n")
	shortFile := file("short", "short\n")
	tokenFile := file("token", "adm1n-t0ken\n")
	rotating := file("rotating", "new-secret-0123456789\nold-secret-0123456789\n")
	rotatingShort := file("rotating-short", "new-secret-0123456789\nold\n")
	emptyFile := file("empty", "\n")
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(config) bool
		wantErr string
	}{
		{"open cluster moves a wildcard address to loopback", []string{"--http-addr", "0.0.0.0:7071"}, nil,
			func(c config) bool {
				return c.sec.clusterSecret == nil && c.httpAddr == "127.0.0.1:7071" && c.rebound == "0.0.0.0:7071" && c.advertise == "127.0.0.1:7071"
			}, ""},
		{"open cluster keeps loopback", []string{"--http-addr", "127.0.0.1:7071"}, nil,
			func(c config) bool { return c.httpAddr == "127.0.0.1:7071" && c.rebound == "" }, ""},
		{"secret from a file binds anywhere", []string{"--http-addr", "0.0.0.0:7071", "--cluster-secret-file", secretFile}, nil,
			func(c config) bool {
				return string(c.sec.clusterSecret) == "0123456789abcdef0123" && c.httpAddr == "0.0.0.0:7071"
			}, ""},
		{"secret from the environment", nil, map[string]string{"HOTSPOT_CLUSTER_SECRET": "env-secret-0123456789"},
			func(c config) bool { return string(c.sec.clusterSecret) == "env-secret-0123456789" }, ""},
		{"secret file from the environment", nil, map[string]string{"HOTSPOT_CLUSTER_SECRET_FILE": secretFile},
			func(c config) bool { return string(c.sec.clusterSecret) == "0123456789abcdef0123" }, ""},
		{"both secrets", []string{"--cluster-secret-file", secretFile}, map[string]string{"HOTSPOT_CLUSTER_SECRET": "env-secret-0123456789"},
			nil, "give one of them"},
		{"short secret", []string{"--cluster-secret-file", shortFile}, nil, nil, "at least 16"},
		{"rotation: new secret first, old still accepted", []string{"--cluster-secret-file", rotating}, nil,
			func(c config) bool {
				return string(c.sec.clusterSecret) == "new-secret-0123456789" && len(c.sec.olderSecrets) == 1 &&
					string(c.sec.olderSecrets[0]) == "old-secret-0123456789"
			}, ""},
		{"rotation: short older secret", []string{"--cluster-secret-file", rotatingShort}, nil, nil, "at least 16"},
		{"missing secret file", []string{"--cluster-secret-file", filepath.Join(dir, "nope")}, nil, nil, "--cluster-secret-file"},
		{"empty secret file", []string{"--cluster-secret-file", emptyFile}, nil, nil, "is empty"},
		{"admin token from a file", []string{"--admin-token-file", tokenFile}, nil,
			func(c config) bool { return c.adminToken == "adm1n-t0ken" }, ""},
		{"admin token twice", []string{"--admin-token-file", tokenFile, "--admin-token", "x"}, nil, nil, "give one of them"},
		{"tls cert without key", []string{"--tls-cert", secretFile}, nil, nil, "go together"},
	}
	for _, tt := range tests {
		c, err := parseConfig(tt.args, env(tt.env))
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: err = %v", tt.name, err)
		case tt.check != nil && !tt.check(c):
			t.Errorf("%s: got %+v", tt.name, c)
		}
	}
}

func TestPprofGuard(t *testing.T) {
	h := pprofHandler("tok", nil)
	tests := []struct {
		name   string
		remote string
		auth   string
		token  string
		want   int
	}{
		{"loopback", "127.0.0.1:5000", "", "tok", 200},
		{"loopback v6", "[::1]:5000", "", "tok", 200},
		{"remote without token", "10.0.0.7:5000", "", "tok", 401},
		{"remote with wrong token", "10.0.0.7:5000", "Bearer nope", "tok", 401},
		{"remote with token", "10.0.0.7:5000", "Bearer tok", "tok", 200},
		{"remote, no admin token configured", "10.0.0.7:5000", "Bearer ", "", 401},
	}
	for _, tt := range tests {
		h := h
		if tt.token != "tok" {
			h = pprofHandler(tt.token, nil)
		}
		req := httptest.NewRequest("GET", "/debug/pprof/", nil)
		req.RemoteAddr = tt.remote
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s: GET /debug/pprof/ = %d, want %d", tt.name, rec.Code, tt.want)
		}
	}
}
