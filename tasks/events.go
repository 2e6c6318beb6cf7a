package tasks

import (
	"context"
	"sync"
)

// EventKind says what an Event reports.
type EventKind string

// The kinds of task events.
const (
	EventStatus   EventKind = "status"   // the task entered Status (creation included)
	EventArtifact EventKind = "artifact" // the task gained Artifact
)

// Event reports one change of a task. Version is the task's version after
// the change, so a subscriber sees versions strictly increase; they may skip
// numbers, since changes that are neither a new state nor an artifact (a
// message appended to the history) bump the version without an event.
type Event struct {
	TaskID   string    `json:"taskId"`
	Version  int64     `json:"version"`
	Kind     EventKind `json:"kind"`
	Status   *Status   `json:"status,omitempty"`
	Artifact *Artifact `json:"artifact,omitempty"`
}

// StatusEvent returns the event of t entering its current status, at its
// current version.
func StatusEvent(t *Task) Event {
	st := t.Status
	return Event{TaskID: t.ID, Version: t.Version, Kind: EventStatus, Status: &st}
}

// ArtifactEvent returns the event of the task gaining a, which took it to
// version.
func ArtifactEvent(taskID string, version int64, a Artifact) Event {
	ac := a.Clone()
	return Event{TaskID: taskID, Version: version, Kind: EventArtifact, Artifact: &ac}
}

// StatusChanged reports whether a write taking a task from prev to next
// changes its status — an event to record — rather than only its history
// or metadata.
func StatusChanged(prev, next *Task) bool {
	return prev.Status.State != next.Status.State || !prev.Status.Timestamp.Equal(next.Status.Timestamp) ||
		prev.Status.Message != next.Status.Message
}

// clone returns a copy of e sharing nothing with it.
func (e Event) clone() Event {
	if e.Status != nil {
		st := *e.Status
		e.Status = &st
	}
	if e.Artifact != nil {
		a := e.Artifact.Clone()
		e.Artifact = &a
	}
	return e
}

// eventOverhead is what contentSize counts for an event's fixed fields
// (kind, version, state, timestamp), about their JSON.
const eventOverhead = 64

// contentSize returns about the bytes of e: its task id, its status
// message, and its artifact's name and parts (texts, raw, URLs, data,
// media types), plus eventOverhead. A MemoryStore bounds its pages of
// events by it.
func (e Event) contentSize() int {
	n := eventOverhead + len(e.TaskID)
	if e.Status != nil {
		n += len(e.Status.Message)
	}
	if a := e.Artifact; a != nil {
		n += len(a.ArtifactID) + len(a.Name)
		for _, p := range a.Parts {
			for _, s := range []*string{p.Text, p.Raw, p.URL} {
				if s != nil {
					n += len(*s)
				}
			}
			n += len(p.Data) + len(p.MediaType)
		}
	}
	return n
}

// Final reports whether the event moves the task to a terminal state: the
// last event of the task.
func (e Event) Final() bool {
	return e.Kind == EventStatus && e.Status != nil && e.Status.State.Terminal()
}

// DefaultEventBuffer is a subscription's channel capacity when none is set.
const DefaultEventBuffer = 64

// Broker fans task events out to subscribers. Publishing never blocks: a
// subscriber whose channel is full is dropped (its channel closed) and
// misses the rest; it can read the task again to catch up. After a final
// event every subscription of the task ends. A Broker is safe for
// concurrent use.
type Broker struct {
	buffer int
	mu     sync.Mutex
	subs   map[string]map[*subscription]struct{}
}

type subscription struct {
	ch   chan Event
	last int64 // highest version delivered, or had when it began
	// known: the subscriber had the task's events up to last when it
	// began (SubscribeAfter); lowest and followed count only those. One
	// that takes what comes from now on (Subscribe) is never caught up.
	known bool
	stop  func() bool // stops the context watch
}

// NewBroker returns a Broker whose subscriptions buffer up to buffer events
// (DefaultEventBuffer when buffer ≤ 0).
func NewBroker(buffer int) *Broker {
	if buffer <= 0 {
		buffer = DefaultEventBuffer
	}
	return &Broker{buffer: buffer, subs: make(map[string]map[*subscription]struct{})}
}

// Subscribe returns a channel of the events of the task published from now
// on. The channel is closed when ctx is done, after the task's final event,
// or when the subscriber falls a whole buffer behind.
func (b *Broker) Subscribe(ctx context.Context, taskID string) <-chan Event {
	return b.subscribe(ctx, taskID, &subscription{})
}

// SubscribeAfter is Subscribe for a subscriber that has the task's events
// up to version after: none of them is delivered again, whoever
// publishes it (see Service.WatchOthers).
func (b *Broker) SubscribeAfter(ctx context.Context, taskID string, after int64) <-chan Event {
	return b.subscribe(ctx, taskID, &subscription{last: after, known: true})
}

func (b *Broker) subscribe(ctx context.Context, taskID string, sub *subscription) <-chan Event {
	sub.ch = make(chan Event, b.buffer)
	b.mu.Lock()
	set := b.subs[taskID]
	if set == nil {
		set = make(map[*subscription]struct{})
		b.subs[taskID] = set
	}
	set[sub] = struct{}{}
	sub.stop = context.AfterFunc(ctx, func() { b.remove(taskID, sub) })
	b.mu.Unlock()
	return sub.ch
}

// closedEvents returns a channel that is already closed: the subscription to a
// task that will not change again.
func closedEvents() <-chan Event {
	ch := make(chan Event)
	close(ch)
	return ch
}

// followed returns the tasks that have subscriptions begun at a known
// version (SubscribeAfter).
func (b *Broker) followed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.subs))
	for id, set := range b.subs {
		for sub := range set {
			if sub.known {
				ids = append(ids, id)
				break
			}
		}
	}
	return ids
}

// lowest returns the lowest version the subscriptions of the task begun
// at a known version were last given (false when it has none): the events
// after it are what one of them may miss.
func (b *Broker) lowest(taskID string) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	low, any := int64(0), false
	for sub := range b.subs[taskID] {
		if sub.known && (!any || sub.last < low) {
			low, any = sub.last, true
		}
	}
	return low, any
}

// Subscribers returns how many subscriptions the task has.
func (b *Broker) Subscribers(taskID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[taskID])
}

func (b *Broker) remove(taskID string, sub *subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(taskID, sub)
}

// removeLocked ends a subscription once; b.mu is held.
func (b *Broker) removeLocked(taskID string, sub *subscription) {
	set := b.subs[taskID]
	if _, ok := set[sub]; !ok {
		return
	}
	delete(set, sub)
	if len(set) == 0 {
		delete(b.subs, taskID)
	}
	if sub.stop != nil {
		sub.stop()
	}
	close(sub.ch)
}

// gone ends every subscription of a task that no longer exists (the
// retention deleted it): no event of it will come.
func (b *Broker) gone(taskID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for sub := range b.subs[taskID] {
		b.removeLocked(taskID, sub)
	}
}

// Publish delivers ev to the task's subscribers without blocking. An event
// whose version is not above what a subscriber last received is not
// delivered to it again.
func (b *Broker) Publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for sub := range b.subs[ev.TaskID] {
		if ev.Version <= sub.last {
			continue
		}
		select {
		case sub.ch <- ev:
			sub.last = ev.Version
		default:
			b.removeLocked(ev.TaskID, sub) // stalled: drop it
			continue
		}
		if ev.Final() {
			b.removeLocked(ev.TaskID, sub)
		}
	}
}
