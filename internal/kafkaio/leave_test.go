package kafkaio

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

func TestSucceeded(t *testing.T) {
	m := func(id, client string) kafka.DescribeGroupsResponseMember {
		return kafka.DescribeGroupsResponseMember{MemberID: id, ClientID: client}
	}
	tests := []struct {
		name             string
		members          []kafka.DescribeGroupsResponseMember
		listed, replaced bool
	}{
		{"empty group", nil, false, false},
		{"only the old entry", []kafka.DescribeGroupsResponseMember{m("old", "me")}, true, false},
		{"old entry and others' entries", []kafka.DescribeGroupsResponseMember{m("old", "me"), m("x", "other")}, true, false},
		{"old entry and its successor", []kafka.DescribeGroupsResponseMember{m("x", "other"), m("old", "me"), m("new", "me")}, true, true},
		{"successor only: the old entry is gone", []kafka.DescribeGroupsResponseMember{m("new", "me")}, false, true},
	}
	for _, tc := range tests {
		listed, replaced := succeeded(tc.members, "old", "me")
		if listed != tc.listed || replaced != tc.replaced {
			t.Errorf("%s: got listed %v, replaced %v; want %v, %v", tc.name, listed, replaced, tc.listed, tc.replaced)
		}
	}
}

// staleMember joins group as a member that then goes silent, with a 60 s
// session and rebalance timeout, as a restarted coordinator loads the entry
// of a member whose process has since joined again under a new ID. It
// returns the member ID once the group is stable with that member alone.
func staleMember(t *testing.T, addr, topic, group string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 10 * time.Second}
	req := &kafka.JoinGroupRequest{
		GroupID: group, SessionTimeout: time.Minute, RebalanceTimeout: time.Minute, ProtocolType: "consumer",
		Protocols: []kafka.GroupProtocol{{Name: "range", Metadata: kafka.GroupProtocolSubscription{Topics: []string{topic}}}},
	}
	for {
		jr, err := client.JoinGroup(ctx, req)
		if err == nil {
			err = jr.Error
		}
		if errors.Is(err, kafka.MemberIDRequired) {
			req.MemberID = jr.MemberID
			continue
		}
		if err != nil {
			t.Fatalf("stale member: join: %v", err)
		}
		sr, err := client.SyncGroup(ctx, &kafka.SyncGroupRequest{
			GroupID: group, GenerationID: jr.GenerationID, MemberID: jr.MemberID, ProtocolType: "consumer", ProtocolName: "range",
			Assignments: []kafka.SyncGroupRequestAssignment{{MemberID: jr.MemberID,
				Assignment: kafka.GroupProtocolAssignment{AssignedPartitions: map[string][]int{topic: {0, 1}}}}},
		})
		if err == nil {
			err = sr.Error
		}
		if err != nil {
			t.Fatalf("stale member: sync: %v", err)
		}
		return jr.MemberID
	}
}

// TestDroppedMemberLeftOnceSuccessorJoins: a member ID kafka-go dropped
// while the group still lists it is left once this Group's new entry has
// joined, not before (the group would form without this member, then
// rebalance again when it joins), and then at once (the rebalance would
// otherwise wait out the old entry's 60 s rebalance timeout).
func TestDroppedMemberLeftOnceSuccessorJoins(t *testing.T) {
	addr := stacktest.Kafka(t)
	topic, group := stacktest.Name(t), stacktest.Name(t)
	createTopic(t, addr, topic, 2)
	old := staleMember(t, addr, topic, group)

	// The Group, its kafka-go member not started yet, and its leaver.
	g, gc, err := build(testConfig(addr, topic, group))
	if err != nil {
		t.Fatal(err)
	}
	g.transport = &kafka.Transport{ClientID: g.clientID}
	g.client = &kafka.Client{Addr: kafka.TCP(addr), Timeout: 10 * time.Second, Transport: g.transport}
	g.done = make(chan struct{})
	joined := make(chan struct{})
	g.leaveLater(old, joined)
	defer func() {
		close(joined)
		g.leavers.Wait()
	}()

	// Without a successor the old entry stays.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		listed, _, err := g.describe(old)
		if err != nil {
			t.Fatalf("describe: %v", err)
		}
		if !listed {
			t.Fatal("the old entry was left before its successor joined")
		}
	}

	// This Group joins: the old entry goes and the generation forms.
	start := time.Now()
	if g.cg, err = kafka.NewConsumerGroup(gc); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	gen, err := g.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v (after %v)", err, time.Since(start))
	}
	took := time.Since(start)
	if got := len(gen.Assignments()); got != 2 {
		t.Errorf("the new entry got %d partitions, want 2 (the old entry still in the group?)", got)
	}
	if took > 10*time.Second {
		t.Errorf("the generation formed %v after the join, want well under the old entry's 60 s rebalance timeout", took)
	}
	t.Logf("the generation formed %v after the join", took.Round(time.Millisecond))
}

// countHandler counts the log records whose message is msg.
type countHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestNextRetriesFailedJoins: with no broker, Next keeps kafka-go trying
// every JoinGroupBackoff and returns the join error only once joins have
// failed for retryFor; a canceled ctx ends it at once.
func TestNextRetriesFailedJoins(t *testing.T) {
	var retries atomic.Int64
	cfg := testConfig(freeAddr(t), "t", "g")
	cfg.Logger = slog.New(countHandler{msg: "kafkaio: join failed; trying again", n: &retries})
	g, err := NewGroup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.retryFor = time.Second
	start := time.Now()
	_, err = g.Next(t.Context())
	took := time.Since(start)
	if err == nil || took < time.Second || took > 5*time.Second {
		t.Fatalf("Next returned %v after %v; want a join error after 1 s", err, took)
	}
	// 250 ms between tries: 4 in the second, of which the last is returned.
	if n := retries.Load(); n < 2 {
		t.Errorf("%d joins retried within Next, want at least 2", n)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := g.Next(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("Next with a 100 ms context: %v after %v; want the deadline error at once", err, time.Since(start))
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
