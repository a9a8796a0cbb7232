package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Removing the member IDs kafka-go dropped.
//
// After a broker restart every process of the group comes back as a new
// member while the coordinator has loaded the group with their old IDs. If
// the old IDs are left as soon as the coordinator answers, the group can
// empty before any process has joined again: the first process to join
// then forms a generation alone, the next one's join starts another
// rebalance that waits for the first to notice it (up to a heartbeat) and
// end its generation, and so on, one rebalance per process. If they are
// never left, the rebalance waits for their sessions to time out. A member
// ID is therefore left as soon as its successor, an entry of this Group
// (told apart by the Group's own client ID), has joined: the old entry
// holds the rebalance open until its process has joined again, and no
// longer, so that the processes that are back join one rebalance.

const (
	leaveTick = 100 * time.Millisecond // how often a leaver describes the group
	leaveFor  = 5 * time.Minute        // how long a leaver waits while no broker answers
)

// leaveLater removes member, a member ID kafka-go dropped, from the group
// once a successor of it is listed. It describes the group every leaveTick
// and sends LeaveGroup whenever member is listed next to another entry with
// this Group's client ID (again if a description still lists it after a
// leave). It never leaves any other entry: one it does not know may be this
// Group's own join in progress. It stops when joined is closed (the next
// generation arrived), at Close, or twice the session timeout after a
// broker first answered (by then the coordinator has expired the member);
// while no broker answers, after leaveFor.
func (g *Group) leaveLater(member string, joined <-chan struct{}) {
	g.leavers.Add(1)
	go func() {
		defer g.leavers.Done()
		log := g.cfg.Logger.With("group", g.cfg.Group, "member", member)
		deadline := time.Now().Add(leaveFor)
		answered := false
		tick := time.NewTicker(leaveTick)
		defer tick.Stop()
		for time.Now().Before(deadline) {
			listed, replaced, err := g.describe(member)
			if err == nil && !answered {
				answered = true
				deadline = time.Now().Add(2 * g.cfg.SessionTimeout)
			}
			switch {
			case err != nil:
				log.Debug("kafkaio: describe the group to leave it as the member kafka-go dropped", "err", err)
			case listed && replaced:
				err := g.leave(member)
				log.Info("kafkaio: left the group as the member kafka-go dropped, its successor having joined", "err", err)
			}
			select {
			case <-g.done:
				return
			case <-joined:
				return
			case <-tick.C:
			}
		}
	}()
}

// describe reports whether member is listed in the group and whether
// another entry with this Group's client ID is.
func (g *Group) describe(member string) (listed, replaced bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := g.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{g.cfg.Group}})
	if err != nil {
		resetOn(g.transport, err)
		return false, false, err
	}
	for _, d := range resp.Groups {
		if d.GroupID != g.cfg.Group {
			continue
		}
		if d.Error != nil {
			return false, false, d.Error
		}
		listed, replaced = succeeded(d.Members, member, g.clientID)
		return listed, replaced, nil
	}
	return false, false, fmt.Errorf("kafkaio: group %s not in its description", g.cfg.Group)
}

// succeeded reports whether member is among members and whether another
// member with clientID, its successor, is.
func succeeded(members []kafka.DescribeGroupsResponseMember, member, clientID string) (listed, replaced bool) {
	for _, m := range members {
		switch {
		case m.MemberID == member:
			listed = true
		case m.ClientID == clientID:
			replaced = true
		}
	}
	return listed, replaced
}

// leave sends LeaveGroup for member.
func (g *Group) leave(member string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := g.client.LeaveGroup(ctx, &kafka.LeaveGroupRequest{
		GroupID: g.cfg.Group, Members: []kafka.LeaveGroupRequestMember{{ID: member}},
	})
	if err != nil {
		resetOn(g.transport, err)
		return err
	}
	errs := []error{resp.Error}
	for _, m := range resp.Members {
		errs = append(errs, m.Error)
	}
	return errors.Join(errs...)
}
