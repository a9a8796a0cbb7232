package router

// ShardHash maps keys to go-redis Ring shard names. Its method set is that
// of go-redis v9's redis.ConsistentHash (Get(string) string); router does not
// import go-redis, so a caller wires it with one line:
//
//	newHash := router.ConsistentHash(router.Config{})
//	opt := &redis.RingOptions{
//		Addrs:             map[string]string{"r1": "10.0.0.1:6379", "r2": "10.0.0.2:6379"},
//		NewConsistentHash: func(shards []string) redis.ConsistentHash { return newHash(shards) },
//	}
//
// go-redis passes the names (the keys of RingOptions.Addrs) of the shards
// that are up, and calls Get with the key after extracting its {hash tag}.
// Because the names are the ring's node IDs, a key lands on the same shard as
// Ring.Lookup with Node{ID: name} says, in every process.
type ShardHash struct{ r *Ring }

// ConsistentHash returns a constructor suitable for go-redis's
// RingOptions.NewConsistentHash. Empty and repeated shard names are skipped;
// a negative cfg.VirtualNodes means the default.
func ConsistentHash(cfg Config) func(shards []string) ShardHash {
	cfg.VirtualNodes = max(cfg.VirtualNodes, 0)
	return func(shards []string) ShardHash {
		nodes := make([]Node, 0, len(shards))
		seen := make(map[string]bool, len(shards))
		for _, s := range shards {
			if s != "" && !seen[s] {
				seen[s] = true
				nodes = append(nodes, Node{ID: s, Addr: s})
			}
		}
		r, err := New(nodes, cfg)
		if err != nil {
			// Only possible with more than 2048 shards at the default
			// virtual-node count; an empty ring makes go-redis report
			// its "all ring shards are down" error instead of misrouting.
			r = &Ring{}
		}
		return ShardHash{r}
	}
}

// Get returns the name of the shard that owns key, or "" when there is none.
func (h ShardHash) Get(key string) string {
	if h.r == nil {
		return ""
	}
	n, ok := h.r.Lookup(key)
	if !ok {
		return ""
	}
	return n.ID
}

// Ring returns the ring behind h.
func (h ShardHash) Ring() *Ring { return h.r }
