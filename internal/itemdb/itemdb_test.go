package itemdb

import (
	"context"
	"errors"
	"testing"

	"github.com/hotspot-dev/hotspot/hotcache"
)

var (
	_ hotcache.Loader = (*DB)(nil)
	_ hotcache.Writer = (*DB)(nil)
)

func TestDB(t *testing.T) {
	ctx := context.Background()
	db := New(10, 0, hotcache.ErrNotFound)
	if v, err := db.Load(ctx, "item:3"); err != nil || string(v) != `{"id":3,"name":"item 3"}` {
		t.Errorf(`Load("item:3") = %q, %v`, v, err)
	}
	for _, key := range []string{"item:10", "item:-1", "item:", "thing:1", "item:x"} {
		if _, err := db.Load(ctx, key); !errors.Is(err, hotcache.ErrNotFound) {
			t.Errorf("Load(%q) = %v, want ErrNotFound", key, err)
		}
	}
	if err := db.Write(ctx, "item:3", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Load(ctx, "item:3"); err != nil || string(v) != "new" {
		t.Errorf("Load after Write = %q, %v", v, err)
	}
	if err := db.Delete(ctx, "item:3"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load(ctx, "item:3"); !errors.Is(err, hotcache.ErrNotFound) {
		t.Errorf("Load after Delete = %v, want ErrNotFound", err)
	}
	if got := db.Reads(); got != 8 {
		t.Errorf("Reads() = %d, want 8", got)
	}
}
