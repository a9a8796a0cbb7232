package local

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisSetup returns the addresses in the environment variable env, which
// `stack.sh env --redis-cluster` or `--redis-sentinel` prints. Without it the
// test is skipped, under CI=true too: `make test` runs every package once
// before it starts these setups (its test-redis target starts them, sets the
// variables and runs these tests), so an unset variable there means "not this
// run", not a missing service. A set variable whose setup does not answer
// fails the test.
func redisSetup(t *testing.T, env, flag string) []string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("%s is not set: deployments/local/stack.sh up %s, then eval \"$(deployments/local/stack.sh env %s)\"", env, flag, flag)
	}
	return strings.Split(v, ",")
}

// TestRedisClusterStack checks the Redis Cluster of `stack.sh up
// --redis-cluster`: three masters, one replica each, all 16384 slots served,
// and SET and GET through a cluster client on keys spread over every master.
func TestRedisClusterStack(t *testing.T) {
	addrs := redisSetup(t, "HOTSPOT_REDIS_CLUSTER", "--redis-cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second})
	defer c.Close()

	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER INFO at %v: %v", addrs, err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("cluster not ok:\n%s", info)
	}
	//lint:ignore SA1019 CLUSTER SLOTS, as the SDK reads it (it works before Redis 7, unlike CLUSTER SHARDS)
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	covered := 0
	replicasOf := map[string]map[string]bool{} // master address -> its replicas' addresses
	for _, s := range slots {
		covered += s.End - s.Start + 1
		if len(s.Nodes) == 0 {
			t.Fatalf("slots %d-%d have no node", s.Start, s.End)
		}
		m := s.Nodes[0].Addr
		if replicasOf[m] == nil {
			replicasOf[m] = map[string]bool{}
		}
		for _, r := range s.Nodes[1:] {
			replicasOf[m][r.Addr] = true
		}
	}
	if covered != 16384 {
		t.Errorf("%d of 16384 slots served", covered)
	}
	var desc []string
	nodes := map[string]bool{}
	for m, rs := range replicasOf {
		nodes[m] = true
		var r []string
		for a := range rs {
			r = append(r, a)
			nodes[a] = true
		}
		sort.Strings(r)
		desc = append(desc, fmt.Sprintf("%s <- %v", m, r))
		if len(rs) != 1 {
			t.Errorf("master %s has %d replicas (%v), want 1", m, len(rs), r)
		}
	}
	sort.Strings(desc)
	if len(replicasOf) != 3 || len(nodes) != 6 {
		t.Errorf("%d masters over %d nodes, want 3 masters with one replica each over 6 nodes: %v", len(replicasOf), len(nodes), desc)
	}

	prefix := fmt.Sprintf("stacktest:%d:%d:", os.Getpid(), time.Now().UnixNano())
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if err := c.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	masters := map[string]bool{}
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		got, err := c.Get(ctx, k).Int()
		if err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", k, got, err, i)
		}
		slot, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", k, err)
		}
		for _, s := range slots {
			if int(slot) >= s.Start && int(slot) <= s.End {
				masters[s.Nodes[0].Addr] = true
			}
		}
	}
	if len(masters) != 3 {
		t.Errorf("100 keys landed on %d masters, want all 3", len(masters))
	}
	t.Logf("masters and replicas: %v", desc)
}

// TestRedisSentinelStack checks the Sentinel setup of `stack.sh up
// --redis-sentinel`: a failover client finds the primary through the
// sentinels, and SET and GET work there.
func TestRedisSentinelStack(t *testing.T) {
	addrs := redisSetup(t, "HOTSPOT_REDIS_SENTINEL", "--redis-sentinel")
	master := os.Getenv("HOTSPOT_REDIS_SENTINEL_MASTER")
	if master == "" {
		master = "hotspot"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	s := redis.NewSentinelClient(&redis.Options{Addr: addrs[0], DialTimeout: time.Second})
	defer s.Close()
	primary, err := s.GetMasterAddrByName(ctx, master).Result()
	if err != nil {
		t.Fatalf("SENTINEL get-master-addr-by-name %s at %s: %v", master, addrs[0], err)
	}
	replicas, err := s.Replicas(ctx, master).Result()
	if err != nil {
		t.Fatalf("SENTINEL REPLICAS %s: %v", master, err)
	}
	if len(replicas) != 1 {
		t.Errorf("sentinel knows %d replicas of %s, want 1: %v", len(replicas), master, replicas)
	}

	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, DialTimeout: time.Second})
	defer c.Close()
	k := fmt.Sprintf("stacktest:%d:%d", os.Getpid(), time.Now().UnixNano())
	if err := c.Set(ctx, k, "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET through the sentinels %v: %v", addrs, err)
	}
	if got, err := c.Get(ctx, k).Result(); err != nil || got != "v" {
		t.Fatalf("GET %s = %q, %v; want \"v\"", k, got, err)
	}
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		t.Errorf("the failover client's node says ROLE %v, %v; want master", role, err)
	}
	t.Logf("primary of %s: %s", master, strings.Join(primary, ":"))
}
