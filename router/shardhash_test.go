package router_test

import (
	"testing"

	"github.com/hotspot-dev/hotspot/router"
)

func TestShardHash(t *testing.T) {
	newHash := router.ConsistentHash(router.Config{VirtualNodes: 64})
	if got := newHash(nil).Get("k"); got != "" {
		t.Errorf("Get on no shards = %q, want \"\"", got)
	}
	if got := (router.ShardHash{}).Get("k"); got != "" {
		t.Errorf("Get on zero ShardHash = %q, want \"\"", got)
	}
	h := newHash([]string{"r2", "", "r1", "r2", "r3"})
	if got := h.Ring().Len(); got != 3 {
		t.Fatalf("ring has %d nodes, want 3 (empty and repeated names skipped)", got)
	}
	r := mustNew(t, []router.Node{{ID: "r1"}, {ID: "r2"}, {ID: "r3"}}, router.Config{VirtualNodes: 64})
	for _, k := range testKeys(2000) {
		want, _ := r.Lookup(k)
		if got := h.Get(k); got != want.ID {
			t.Fatalf("Get(%q) = %q, Ring.Lookup says %q", k, got, want.ID)
		}
	}
	if got := router.ConsistentHash(router.Config{VirtualNodes: -5})([]string{"x"}).Get("k"); got != "x" {
		t.Errorf("negative VirtualNodes: Get = %q, want \"x\" (default used)", got)
	}
}
