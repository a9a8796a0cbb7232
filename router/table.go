package router

import "sync/atomic"

// Table holds the current Ring of a changing set of nodes. Update builds a
// new immutable Ring and swaps it in atomically, so lookups never lock and
// always see one whole ring, either the old one or the new one.
type Table struct {
	cfg  Config
	ring atomic.Pointer[Ring]
}

// NewTable returns a Table holding an empty ring; its Lookup reports false
// until the first successful Update.
func NewTable(cfg Config) *Table {
	t := &Table{cfg: cfg}
	t.ring.Store(&Ring{})
	return t
}

// Update replaces the ring with one built from nodes. On error (see New) the
// current ring stays in place.
func (t *Table) Update(nodes []Node) error {
	r, err := New(nodes, t.cfg)
	if err != nil {
		return err
	}
	t.ring.Store(r)
	return nil
}

// Ring returns the current ring. It never returns nil.
func (t *Table) Ring() *Ring { return t.ring.Load() }

// Lookup is Ring().Lookup(key).
func (t *Table) Lookup(key string) (Node, bool) { return t.ring.Load().Lookup(key) }
