package zkgroup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

func TestParseDigest(t *testing.T) {
	tests := []struct {
		in   string
		want zkgroup.Digest
		ok   bool
	}{
		{"hotspotd:s3cret", zkgroup.Digest{User: "hotspotd", Password: "s3cret"}, true},
		{"app:pa:ss\n", zkgroup.Digest{User: "app", Password: "pa:ss"}, true},
		{"nopassword", zkgroup.Digest{}, false},
		{":pw", zkgroup.Digest{}, false},
		{"user:", zkgroup.Digest{}, false},
	}
	for _, tt := range tests {
		got, err := zkgroup.ParseDigest(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDigest(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestACL: nodes created by an authenticated writer are written by it alone;
// an app identity reads them and cannot write, and a client without auth can
// neither write nor (with named readers) read.
func TestACL(t *testing.T) {
	addr, root := setup(t)
	writer := zkgroup.Digest{User: "hotspotd", Password: "w-secret"}
	app := zkgroup.Digest{User: "shop", Password: "r-secret"}
	w := connect(t, addr, zkgroup.Config{Auth: writer, ACL: zkgroup.ACL{Writer: writer, Readers: []zkgroup.Digest{app}}})
	t.Cleanup(func() { deleteAll(w.Conn(), root) }) // before setup's unauthenticated cleanup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := root + "/hot/shop/n1"
	if err := w.Create(ctx, node, []byte("v1")); err != nil { // and its parents
		t.Fatal(err)
	}
	if err := w.Put(ctx, root+"/hot/shop/n2", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	joined := make(chan error, 1)
	go func() { joined <- w.Join(ctx, root+"/members/aggregators", "a1", []byte(`{}`)) }()
	waitUntil(t, "the member node", func() bool { ok, _, _ := w.Conn().Exists(root + "/members/aggregators/a1"); return ok })

	if _, err := w.Conn().Set(node, []byte("v2"), -1); err != nil {
		t.Errorf("writer Set: %v", err)
	}
	r := connect(t, addr, zkgroup.Config{Auth: app})
	anon := connect(t, addr, zkgroup.Config{})
	for _, c := range []struct {
		who  string
		conn *zk.Conn
	}{{"app identity", r.Conn()}, {"no auth", anon.Conn()}} {
		for _, p := range []string{node, root + "/hot/shop/n2", root + "/members/aggregators/a1", root + "/hot/shop"} {
			if _, err := c.conn.Set(p, []byte("evil"), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("%s Set %s: %v, want ErrNoAuth", c.who, p, err)
			}
			if err := c.conn.Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) && !errors.Is(err, zk.ErrNotEmpty) {
				t.Errorf("%s Delete %s: %v, want ErrNoAuth", c.who, p, err)
			}
		}
		for _, p := range []string{root + "/hot/shop/%pins", root + "/members/aggregators/rogue", root + "/hot/evil"} {
			if _, err := c.conn.Create(p, []byte("x"), 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("%s Create %s: %v, want ErrNoAuth", c.who, p, err)
			}
		}
	}
	if b, _, err := r.Conn().Get(node); err != nil || string(b) != "v2" {
		t.Errorf("app identity Get = %q, %v; want v2", b, err)
	}
	if _, _, err := anon.Conn().Get(node); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("no auth Get with named readers: %v, want ErrNoAuth", err)
	}
	// A private node: the writer alone reads it.
	private := root + "/webhooks/shop"
	if err := w.CreatePrivate(ctx, private, []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if b, _, err := w.Get(ctx, private); err != nil || string(b) != "secret" {
		t.Errorf("writer Get of a private node = %q, %v", b, err)
	}
	for who, s := range map[string]*zkgroup.Session{"app identity": r, "no auth": anon} {
		if _, _, err := s.Get(ctx, private); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s Get of a private node: %v, want ErrNoAuth", who, err)
		}
		if err := s.Set(ctx, private, []byte("evil"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s Set of a private node: %v, want ErrNoAuth", who, err)
		}
	}
	cancel()
	<-joined
}

// With no named readers, anyone may read and only the writer may write.
func TestACLWorldRead(t *testing.T) {
	addr, root := setup(t)
	writer := zkgroup.Digest{User: "hotspotd", Password: "w-secret"}
	w := connect(t, addr, zkgroup.Config{Auth: writer, ACL: zkgroup.ACL{Writer: writer}})
	t.Cleanup(func() { deleteAll(w.Conn(), root) })
	if err := w.Create(context.Background(), root+"/hot", nil); err != nil {
		t.Fatal(err)
	}
	anon := connect(t, addr, zkgroup.Config{})
	if _, _, err := anon.Conn().Get(root + "/hot"); err != nil {
		t.Errorf("no auth Get: %v, want world-readable", err)
	}
	if _, err := anon.Conn().Create(root+"/hot/x", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("no auth Create: %v, want ErrNoAuth", err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
