package main

import (
	"slices"
	"strings"
	"testing"
)

// TestRedisChoice: --redis and --redis-cluster exclude each other; the one
// on the command line wins over the other's variable; both variables without
// either flag are refused.
func TestRedisChoice(t *testing.T) {
	both := map[string]string{"HOTSPOT_REDIS": "r:6379", "HOTSPOT_REDIS_CLUSTER": "c1:7000,c2:7000"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		redis   string
		cluster []string
		err     string
	}{
		{name: "default", redis: "127.0.0.1:16379"},
		{name: "cluster variable", env: map[string]string{"HOTSPOT_REDIS_CLUSTER": "c1:7000"}, cluster: []string{"c1:7000"}},
		{name: "both flags", args: []string{"--redis", "r:1", "--redis-cluster", "c:1"}, err: "exclusive"},
		{name: "--redis over the cluster variable", args: []string{"--redis", "x:1"}, env: both, redis: "x:1"},
		{name: "--redis-cluster over the variable", args: []string{"--redis-cluster", "y:1,z:1"}, env: both, cluster: []string{"y:1", "z:1"}},
		{name: "both variables", env: both, err: "both set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--app", "a"}, tc.args...)
			cfg, err := parseConfig(args, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.proxy.RedisCluster, tc.cluster) || (len(tc.cluster) == 0 && cfg.proxy.Redis != tc.redis) {
				t.Errorf("redis %q, cluster %q; want %q, %q", cfg.proxy.Redis, cfg.proxy.RedisCluster, tc.redis, tc.cluster)
			}
		})
	}
}

// TestUpstreamFlag: --upstream and HOTSPOT_UPSTREAM choose the upstream
// mode, dedicated by default; shared is refused with a Redis Cluster.
func TestUpstreamFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		want  string
		conns int
		err   string
	}{
		{name: "default", want: "dedicated", conns: 2},
		{name: "flag", args: []string{"--upstream", "shared", "--upstream-conns", "3"}, want: "shared", conns: 3},
		{name: "variables", env: map[string]string{"HOTSPOT_UPSTREAM": "shared", "HOTSPOT_UPSTREAM_CONNS": "1"}, want: "shared", conns: 1},
		{name: "flag over variable", args: []string{"--upstream", "dedicated"}, env: map[string]string{"HOTSPOT_UPSTREAM": "shared"}, want: "dedicated", conns: 2},
		{name: "unknown", args: []string{"--upstream", "pooled"}, err: "--upstream"},
		{name: "no connection", args: []string{"--upstream", "shared", "--upstream-conns", "0"}, err: "--upstream-conns"},
		{name: "cluster", args: []string{"--upstream", "shared", "--redis-cluster", "c:1"}, want: "shared", conns: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(append([]string{"--app", "a"}, tc.args...), func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.proxy.Upstream != tc.want || cfg.proxy.UpstreamConns != tc.conns {
				t.Errorf("upstream %q, %d connections; want %q, %d", cfg.proxy.Upstream, cfg.proxy.UpstreamConns, tc.want, tc.conns)
			}
		})
	}
}
