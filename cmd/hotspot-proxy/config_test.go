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
