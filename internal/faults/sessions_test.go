package faults

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessions stands in for the broker's session expiry where kfake lacks it.
//
// A worker killed while its JoinGroup or SyncGroup waits at the broker leaves
// a member behind whose answer cannot be delivered. Kafka starts a session
// timer for every member when a rebalance completes, so such a member expires
// a session later. kfake starts the timer only when the answer is delivered
// (group.reply), and once the leader's SyncGroup settles the group the member
// stays forever, holding its partitions: nobody consumes them again. sessions
// notes when each member last spoke (heartbeat, join, sync, commit) and, in
// a stable group, removes with a LeaveGroup a member that has been silent for
// longer than a session, as Kafka would. Every such removal is logged.
type sessions struct {
	t       *testing.T
	cluster *kfake.Cluster
	group   string
	client  *kafka.Client
	broker  string

	mu       sync.Mutex
	lastSeen map[string]time.Time
	log      []string // membership changes, for a failing test's output

	stop context.CancelFunc
	done chan struct{}
}

func watchSessions(t *testing.T, c *kfake.Cluster, group string, client *kafka.Client, broker string) *sessions {
	s := &sessions{t: t, cluster: c, group: group, client: client, broker: broker, lastSeen: map[string]time.Time{}, done: make(chan struct{})}
	for _, key := range []kmsg.Key{kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetCommit} {
		c.ControlKey(key.Int16(), s.observe)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.run(ctx)
	t.Cleanup(func() {
		s.stop()
		<-s.done
		s.mu.Lock()
		t.Logf("--- group %s membership ---\n%s", group, strings.Join(s.log, "\n"))
		s.mu.Unlock()
	})
	return s
}

// observe runs on the broker's goroutine: it must not block.
func (s *sessions) observe(req kmsg.Request) (kmsg.Response, error, bool) {
	var group, member string
	switch r := req.(type) {
	case *kmsg.HeartbeatRequest:
		group, member = r.Group, r.MemberID
	case *kmsg.JoinGroupRequest:
		group, member = r.Group, r.MemberID
	case *kmsg.SyncGroupRequest:
		group, member = r.Group, r.MemberID
	case *kmsg.OffsetCommitRequest:
		group, member = r.Group, r.MemberID
	}
	if group == s.group && member != "" {
		s.mu.Lock()
		s.lastSeen[member] = time.Now()
		s.mu.Unlock()
	}
	return nil, nil, false
}

func (s *sessions) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		info := s.cluster.GroupInfo(s.group)
		if info == nil {
			continue
		}
		if d := describe(info); d != last {
			last = d
			s.note("%s %s", time.Now().Format("15:04:05.000"), d)
		}
		if info.State != "Stable" {
			continue
		}
		for _, m := range info.Members {
			s.mu.Lock()
			seen, ok := s.lastSeen[m.MemberID]
			if !ok {
				// A member that joined with JoinGroup v3 or older, or never
				// received its join answer, has not named itself yet.
				seen = time.Now()
				s.lastSeen[m.MemberID] = seen
			}
			s.mu.Unlock()
			if time.Since(seen) >= sessionTimeout+2*time.Second {
				s.reap(ctx, m, time.Since(seen))
			}
		}
	}
}

func (s *sessions) reap(ctx context.Context, m kfake.GroupMember, silent time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.client.LeaveGroup(ctx, &kafka.LeaveGroupRequest{Addr: kafka.TCP(s.broker), GroupID: s.group,
		Members: []kafka.LeaveGroupRequestMember{{ID: m.MemberID}}})
	s.note("%s removed member %s (silent %v, partitions %v): its session would have expired: %v",
		time.Now().Format("15:04:05.000"), m.MemberID, silent.Round(time.Millisecond), m.Assignment, err)
	s.t.Logf("broker sessions: removed member %s, silent for %v with partitions %v (kfake keeps a member whose join answer could not be delivered)",
		m.MemberID, silent.Round(time.Millisecond), m.Assignment)
	s.mu.Lock()
	delete(s.lastSeen, m.MemberID)
	s.mu.Unlock()
}

func (s *sessions) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

func describe(info *kfake.GroupInfo) string {
	parts := make([]string, 0, len(info.Members))
	for _, m := range info.Members {
		var ps []int32
		for _, p := range m.Assignment {
			ps = append(ps, p...)
		}
		slices.Sort(ps)
		parts = append(parts, fmt.Sprintf("%s%v", shortID(m.MemberID), ps))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s gen %d: %s", info.State, info.Epoch, strings.Join(parts, " "))
}

func shortID(id string) string {
	if i := strings.LastIndexByte(id, '-'); i >= 0 && len(id)-i > 8 {
		return id[:i+9]
	}
	return id
}
