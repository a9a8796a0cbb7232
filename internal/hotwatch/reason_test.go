package hotwatch

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
)

func ruleP(i int) *int { return &i }

// reason prints a key's rule and kind for test messages.
func reason(k hotset.Key) string {
	if k.Rule == nil {
		return fmt.Sprintf("rule=nil kind=%q", k.Kind)
	}
	return fmt.Sprintf("rule=%d kind=%q", *k.Rule, k.Kind)
}

// TestMergeRuleAndKind checks that each key keeps the rule and kind its
// shard published, and that a key in two shards gets the strongest kind
// whatever the order the shards are read in.
func TestMergeRuleAndKind(t *testing.T) {
	tests := []struct {
		name     string
		a, b     hotset.Key // the key as shard agg-1 and agg-2 publish it; b.Key "" means not in agg-2
		wantRule *int
		wantKind string
	}{
		{"one shard, default rule", hotset.Key{Rule: ruleP(-1), Kind: "count"}, hotset.Key{}, ruleP(-1), "count"},
		{"one shard, older writer", hotset.Key{}, hotset.Key{}, nil, ""},
		{"one shard, bytes", hotset.Key{Rule: ruleP(3), Kind: "bytes"}, hotset.Key{}, ruleP(3), "bytes"},
		{"write beats count", hotset.Key{Rule: ruleP(0), Kind: "count"}, hotset.Key{Rule: ruleP(2), Kind: "write"}, ruleP(2), "write"},
		{"write beats bytes", hotset.Key{Rule: ruleP(5), Kind: "write"}, hotset.Key{Rule: ruleP(1), Kind: "bytes"}, ruleP(5), "write"},
		{"bytes beats count", hotset.Key{Rule: ruleP(1), Kind: "count"}, hotset.Key{Rule: ruleP(4), Kind: "bytes"}, ruleP(4), "bytes"},
		{"same kind: lower rule", hotset.Key{Rule: ruleP(7), Kind: "count"}, hotset.Key{Rule: ruleP(-1), Kind: "count"}, ruleP(-1), "count"},
		{"empty kind is count", hotset.Key{Rule: ruleP(2)}, hotset.Key{Rule: ruleP(1), Kind: "count"}, ruleP(1), "count"},
		{"a pin keeps the detected reason", hotset.Key{Source: "pinned"}, hotset.Key{Rule: ruleP(3), Kind: "write"}, ruleP(3), "write"},
	}
	for _, tt := range tests {
		for _, order := range []string{"agg-1 first", "agg-2 first"} {
			t.Run(tt.name+"/"+order, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := newFakeZK()
					w, _ := start(t, f, "shop")
					now := time.Now()
					a, b := tt.a, tt.b
					a.Key, a.Rate = "k", 10
					put := []func(){func() { putShard(t, f, "shop", "agg-1", now, time.Minute, a) }}
					if b.Kind != "" || b.Rule != nil {
						b.Key, b.Rate = "k", 20
						put = append(put, func() { putShard(t, f, "shop", "agg-2", now, time.Minute, b) })
					}
					if order == "agg-2 first" {
						for i, j := 0, len(put)-1; i < j; i, j = i+1, j-1 {
							put[i], put[j] = put[j], put[i]
						}
					}
					for _, p := range put {
						p()
						synctest.Wait()
					}
					got, ok := w.Snapshot().Key("shop", "k")
					want := hotset.Key{Rule: tt.wantRule, Kind: tt.wantKind}
					if !ok || reason(got) != reason(want) {
						t.Errorf("merged %s, hot %v; want %s", reason(got), ok, reason(want))
					}
				})
			})
		}
	}
}

// TestReasonChange checks that a change of a hot key's kind or rule alone is
// a Change listing the key in Changed, and that a rate update is not.
func TestReasonChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		w, rec := start(t, f, "shop")
		now := time.Now()
		steps := []struct {
			key         hotset.Key
			wantChanged bool
		}{
			{hotset.Key{Key: "k", Rate: 5, Rule: ruleP(0), Kind: "count"}, false}, // added
			{hotset.Key{Key: "k", Rate: 9, Rule: ruleP(0), Kind: "count"}, false}, // rate only
			{hotset.Key{Key: "k", Rate: 9, Rule: ruleP(0), Kind: "write"}, true},
			{hotset.Key{Key: "k", Rate: 9, Rule: ruleP(1), Kind: "write"}, true},
			{hotset.Key{Key: "k", Rate: 9, Rule: ruleP(1), Kind: "write"}, false}, // same bytes but Updated
			{hotset.Key{Key: "k", Rate: 9, Rule: ruleP(1), Kind: "count"}, true},
			{hotset.Key{Key: "k", Rate: 9, Rule: ruleP(1)}, false}, // "" reads as count
		}
		for i, st := range steps {
			before := len(rec.all())
			putShard(t, f, "shop", "s", now.Add(time.Duration(i)*time.Millisecond), time.Minute, st.key)
			synctest.Wait()
			all := rec.all()
			var changed []hotset.Key
			if len(all) > before {
				changed = all[len(all)-1].Changed
			}
			if i == 0 {
				if len(all) != 1 || len(all[0].Added) != 1 {
					t.Fatalf("step 0: changes %+v, want one adding k", all)
				}
				continue
			}
			if got := len(changed) == 1 && changed[0].Key == "k"; got != st.wantChanged || len(all)-before > 1 {
				t.Errorf("step %d (%s): %d new changes, Changed %+v; want Changed [k] %v", i, reason(st.key), len(all)-before, changed, st.wantChanged)
			}
			if st.wantChanged && reason(changed[0]) != reason(st.key) {
				t.Errorf("step %d: Changed %s, want %s", i, reason(changed[0]), reason(st.key))
			}
			if got, _ := w.Snapshot().Key("shop", "k"); reason(got) != reason(st.key) {
				t.Errorf("step %d: snapshot %s, want %s", i, reason(got), reason(st.key))
			}
		}
	})
}
