package router_test

import (
	"sync"
	"testing"

	"github.com/hotspot-dev/hotspot/router"
)

func TestTable(t *testing.T) {
	tab := router.NewTable(router.Config{VirtualNodes: 32})
	if n, ok := tab.Lookup("k"); ok {
		t.Fatalf("Lookup before Update = %+v, true; want false", n)
	}
	if tab.Ring() == nil || tab.Ring().Len() != 0 {
		t.Fatalf("Ring() before Update = %v, want an empty ring", tab.Ring())
	}
	if err := tab.Update([]router.Node{{ID: "a"}, {ID: "b"}}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	before := tab.Ring()
	if err := tab.Update([]router.Node{{ID: "a"}, {ID: "a"}}); err == nil {
		t.Fatal("Update with a duplicate ID succeeded, want an error")
	}
	if tab.Ring() != before {
		t.Error("a failed Update replaced the ring")
	}
	want, _ := before.Lookup("user:1")
	if got, ok := tab.Lookup("user:1"); !ok || got != want {
		t.Errorf("Table.Lookup = %+v, %v; want %+v, true", got, ok, want)
	}
}

// TestTableConcurrent: readers always see a whole ring while a writer swaps
// rings; run with -race.
func TestTableConcurrent(t *testing.T) {
	tab := router.NewTable(router.Config{VirtualNodes: 16})
	small := []router.Node{{ID: "a"}, {ID: "b"}}
	large := []router.Node{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	if err := tab.Update(small); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			keys := testKeys(256)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := tab.Ring()
				n, ok := r.Lookup(keys[i%len(keys)])
				if !ok || (r.Len() == 2 && n.ID != "a" && n.ID != "b") {
					t.Errorf("Lookup on a %d-node ring = %+v, %v", r.Len(), n, ok)
					return
				}
			}
		})
	}
	for i := range 200 {
		nodes := small
		if i%2 == 0 {
			nodes = large
		}
		if err := tab.Update(nodes); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
