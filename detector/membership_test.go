package detector

import (
	"context"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// TestMembershipInZooKeeper runs a detector with a real ZooKeeper session as
// its Membership: it registers under hotset.DetectorsDir while it runs,
// counts every registered detector as D, and leaves when Run returns.
func TestMembershipInZooKeeper(t *testing.T) {
	addr := stacktest.ZK(t)
	conn := stacktest.ZKConn(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sess, err := zkgroup.Connect(ctx, []string{addr}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	root := "/" + stacktest.Name(t)
	dir := hotset.DetectorsDir(root)
	t.Cleanup(func() {
		for _, p := range []string{path.Join(dir, "other"), dir, path.Dir(dir), root} {
			_ = conn.Delete(p, -1)
		}
	})

	topic := newFakeTopic(1)
	d, stop := startFake(t, Config{Membership: sess, Root: root, ID: "det/1", Addr: "127.0.0.1:7070"}, newFakeSource(topic), newFakeSink(topic))
	node := path.Join(dir, hotset.Escape("det/1"))
	eventually(t, 10*time.Second, "the detector's node", func() (bool, string) {
		data, _, err := conn.Get(node)
		m, derr := hotset.DecodeMember(data)
		return err == nil && derr == nil && m.ID == "det/1" && m.Addr == "127.0.0.1:7070", fmt.Sprintf("%q %v", data, err)
	})
	eventually(t, 10*time.Second, "D = 1", func() (bool, string) { n := d.cfg.Detectors(); return n == 1, fmt.Sprint("D = ", n) })
	if _, err := conn.Create(path.Join(dir, "other"), hotset.EncodeMember(hotset.Member{ID: "other"}), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "D = 2 after a second detector joined", func() (bool, string) {
		n := d.cfg.Detectors()
		return n == 2, fmt.Sprint("D = ", n)
	})

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ok, _, err := conn.Exists(node); err != nil || ok {
		t.Errorf("after Run returned: node exists %v (%v), want it gone", ok, err)
	}
}

func TestMembershipNeedsID(t *testing.T) {
	if _, err := New(Config{Source: newFakeSource(newFakeTopic(1)), Membership: &zkgroup.Session{}}, newFakeSink(nil)); err == nil {
		t.Error("New with Membership and no ID: no error")
	}
}
