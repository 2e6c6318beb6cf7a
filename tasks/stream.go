package tasks

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/slots"
	"github.com/snapnode/snapnode/snap"
)

// Defaults of the streaming options of ServiceOptions.
const (
	DefaultStreamMaxDuration      = 10 * time.Minute
	DefaultStreamHeartbeat        = 25 * time.Second
	DefaultMaxStreams             = 1000
	DefaultMaxStreamsPerRequester = 16
	DefaultMaxStreamWaiters       = 256
)

// StreamRetryAfter is the retryAfter, in seconds, of the 5002 refusing a
// stream past the limits.
const StreamRetryAfter = 5

// MaxAfterVersion is the largest afterVersion of a tasks/resubscribe
// request: the largest integer a JSON number holds exactly.
const MaxAfterVersion = snap.MaxAfterVersion

// ProgressUpdate is the payload of a progress event of message/stream and
// tasks/resubscribe: the SNAP specification's {taskId, progress, message},
// plus the task's state. Progress is 0 for submitted, 0.5 for working and
// input_required, 1 for the terminal states.
//
// Events come in four forms:
//   - a status event: the task entered State (Timestamp is the status
//     timestamp, Message its note or "task <state>"), Version the task
//     event's version;
//   - the current state, first event of tasks/resubscribe: Current true,
//     no Version (it is a view of the task, not one of its events);
//   - a heartbeat, sent while the task is quiet: Heartbeat true, no
//     Version;
//   - an artifact event too large for the transport even with one part
//     left: ArtifactID names it, Version is the artifact event's, and
//     Message says it was left out (the task holds it).
//
// Only task events carry a Version, and within one stream versions
// strictly increase: a requester resumes with afterVersion = the last it
// saw.
type ProgressUpdate struct {
	TaskID     string  `json:"taskId"`
	Progress   float64 `json:"progress"`
	Message    string  `json:"message"`
	State      State   `json:"state"`
	Timestamp  string  `json:"timestamp,omitempty"`
	Version    int64   `json:"version,omitzero"`
	Current    bool    `json:"current,omitzero"`
	Heartbeat  bool    `json:"heartbeat,omitzero"`
	ArtifactID string  `json:"artifactId,omitempty"`
}

// ArtifactUpdate is the payload of an artifact event: the SNAP
// specification's {taskId, artifact: {artifactId, parts, partial}}, plus the
// version of the task event. Artifacts are added whole, so Partial is false
// unless the event was shrunk (snap.Shrinker) to fit the transport: parts
// are then dropped from the end and Partial is true; with one part left and
// still too large, the event becomes a ProgressUpdate naming the artifact.
// The final response's task has every artifact whole.
type ArtifactUpdate struct {
	TaskID   string         `json:"taskId"`
	Artifact StreamArtifact `json:"artifact"`
	Version  int64          `json:"version"`

	state   State // of the task, for the notice replacing an artifact left out
	omitted bool
}

// StreamArtifact is an artifact as a stream event carries it.
type StreamArtifact struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name,omitempty"`
	Parts      []Part `json:"parts"`
	Partial    bool   `json:"partial"`
}

var _ snap.Shrinker = (*ArtifactUpdate)(nil)

// Shrink drops the artifact's last part (Partial becomes true); with one
// part left it turns the event into a notice that the artifact was left
// out. It reports false once it is that notice.
func (u *ArtifactUpdate) Shrink() bool {
	switch {
	case u.omitted:
		return false
	case len(u.Artifact.Parts) > 1:
		u.Artifact.Parts = u.Artifact.Parts[:len(u.Artifact.Parts)-1]
		u.Artifact.Partial = true
	default:
		u.omitted = true
	}
	return true
}

// MarshalJSON writes the artifact event, or the notice that replaced it.
func (u *ArtifactUpdate) MarshalJSON() ([]byte, error) {
	if u.omitted {
		return json.Marshal(ProgressUpdate{TaskID: u.TaskID, Progress: Progress(u.state), State: u.state,
			Message:    fmt.Sprintf("artifact %s is too large for this transport; the task holds it", u.Artifact.ArtifactID),
			Version:    u.Version,
			ArtifactID: u.Artifact.ArtifactID,
		})
	}
	type plain ArtifactUpdate // without this method
	return json.Marshal((*plain)(u))
}

// Progress is the progress number of a state in progress events.
func Progress(st State) float64 {
	switch {
	case st == StateSubmitted:
		return 0
	case st.Terminal():
		return 1
	}
	return 0.5
}

// StreamPayload returns the payload of the stream event reporting ev:
// a *ProgressUpdate for a status event, an *ArtifactUpdate for an artifact
// event (state is the task's state then). It returns nil for an event of
// another kind.
func StreamPayload(ev Event, state State) any {
	switch {
	case ev.Kind == EventStatus && ev.Status != nil:
		return statusUpdate(ev.TaskID, *ev.Status, ev.Version)
	case ev.Kind == EventArtifact && ev.Artifact != nil:
		return &ArtifactUpdate{TaskID: ev.TaskID, Version: ev.Version, state: state, Artifact: StreamArtifact{
			ArtifactID: ev.Artifact.ArtifactID, Name: ev.Artifact.Name, Parts: ev.Artifact.Parts}}
	}
	return nil
}

func statusUpdate(taskID string, st Status, version int64) *ProgressUpdate {
	msg := st.Message
	if msg == "" {
		msg = "task " + string(st.State)
	}
	return &ProgressUpdate{TaskID: taskID, Progress: Progress(st.State), Message: msg, State: st.State,
		Timestamp: st.Timestamp.UTC().Format(TimestampLayout), Version: version}
}

// streamLimits holds the streaming options and the stream slots.
type streamLimits struct {
	maxDuration, heartbeat time.Duration
	slots                  *slots.Pool
}

func newStreamLimits(opts ServiceOptions) *streamLimits {
	l := &streamLimits{maxDuration: opts.StreamMaxDuration, heartbeat: opts.StreamHeartbeat}
	if l.maxDuration <= 0 {
		l.maxDuration = DefaultStreamMaxDuration
	}
	if l.heartbeat <= 0 {
		l.heartbeat = DefaultStreamHeartbeat
	}
	lim := slots.Limits{Max: opts.MaxStreams, PerIdentity: opts.MaxStreamsPerRequester, PerKey: opts.MaxStreamsPerKey,
		MaxNewcomers: opts.MaxNewcomerStreams, Wait: opts.StreamWait, MaxWaiting: opts.MaxStreamWaiters}
	if lim.Max <= 0 {
		lim.Max = DefaultMaxStreams
	}
	if lim.PerIdentity <= 0 {
		lim.PerIdentity = DefaultMaxStreamsPerRequester
	}
	if lim.PerKey <= 0 {
		lim.PerKey = lim.PerIdentity
	}
	if lim.MaxNewcomers <= 0 || lim.MaxNewcomers > lim.Max {
		lim.MaxNewcomers = max(lim.Max/2, 1)
	}
	if lim.MaxWaiting <= 0 {
		lim.MaxWaiting = DefaultMaxStreamWaiters
	}
	l.slots = slots.New(lim)
	return l
}

// acquire takes a stream slot for requester, waiting up to StreamWait
// for one (known requesters are served first), or fails with 5002
// {retryAfter, limit, scope}. A requester that is not known (no task
// history) takes one of the MaxNewcomerStreams slots newcomers share, so
// that a flood of fresh identities leaves the other slots to known ones.
// The key bound counts both networks' addresses of one key (the Nostr
// key behind them) together. release gives the slot back (once).
func (l *streamLimits) acquire(ctx context.Context, requester string, known bool) (release func(), err error) {
	c := slots.Claim{Identity: strings.ToLower(requester), Known: known}
	c.Key = c.Identity
	if a, err := identity.ParseAddress(c.Identity); err == nil {
		c.Key = hex.EncodeToString(a.Key[:])
	}
	release, err = l.slots.Acquire(ctx, c)
	if full, ok := errors.AsType[*slots.Full](err); ok {
		return nil, snap.LimitReached(snap.CodeRateLimitExceeded, "too many open streams; try again later",
			StreamRetryAfter, full.Limit, full.Scope)
	}
	return release, err
}

// Known reports whether requester has a history here: an operator, or
// the owner of a task the node has answered (one no longer submitted or
// working). The stream slots and the agent's queue keep a share for
// known peers. A task still waiting or worked on is no history: a fresh
// identity's first task, queued or streaming, does not make it known for
// its next ones. A store error counts as none. The task is read brief:
// its history and artifacts are not needed to know it exists.
func (s *Service) Known(ctx context.Context, requester string) bool {
	if s.IsOperator(requester) {
		return true
	}
	answered := []State{StateInputRequired, StateCompleted, StateFailed, StateCanceled}
	ts, err := s.store.List(ctx, Filter{Owner: requester, States: answered, Limit: 1, Brief: true})
	return err == nil && len(ts) > 0
}

// OpenStreams returns how many streams are open.
func (s *Service) OpenStreams() int {
	return s.streams.slots.Stats().Open
}

// StreamSlots returns the counts of the stream slots: open, held by
// newcomers, requests waiting.
func (s *Service) StreamSlots() slots.Stats {
	return s.streams.slots.Stats()
}

// startStream takes a stream slot for who (see StreamMessage for the
// limits and the wait) and bounds ctx by StreamMaxDuration; end cancels
// that context and gives the slot back.
func (s *Service) startStream(ctx context.Context, who string) (_ context.Context, end func(), err error) {
	release, err := s.streams.acquire(ctx, who, s.Known(ctx, who))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.streams.maxDuration)
	return ctx, func() { cancel(); release() }, nil
}

// StreamMessage handles a message/stream request from owner: the request
// is message/send's (same params, ownership, idempotency,
// and the proposals run as there), then the task's events since the
// message arrived are emitted — all of them for a new task, or for a task
// an idempotency key found — as ProgressUpdate and ArtifactUpdate
// payloads, followed live, until the task is terminal or input_required
// or StreamMaxDuration passed; the task as it is then is returned for the
// final response. A heartbeat is emitted whenever the task was quiet for
// StreamHeartbeat.
//
// The proposals run within the request, as for message/send, so their
// events are emitted once they ran: the stream follows the task's later
// changes live (an operator's approval, a worker).
//
// emit may wait for the peer (a transport's backpressure, up to its
// write timeout): the stream runs in the caller's goroutine and holds no
// lock of the task while it emits, and the broker never waits for it, so
// a slow peer holds up only its own stream. When emit fails (the
// transport is gone), or the broker drops the subscription because the
// events are not read fast enough, the stream ends and the task as it is
// is returned. A stream takes a slot first:
// past MaxStreamsPerRequester of one requester, or MaxStreamsPerKey of one
// key's addresses, the request is 5002 at once; when MaxStreams are open
// (MaxNewcomerStreams for a requester with no task yet) it waits up to
// StreamWait, known requesters served first, then is 5002.
func (s *Service) StreamMessage(ctx context.Context, owner string, req *SendParams, emit func(any) error) (*Task, error) {
	ctx, end, err := s.startStream(ctx, owner)
	if err != nil {
		return nil, err
	}
	defer end()
	// The events of this message are those after the task's version
	// now; a concurrent write may add some of its own, which are the
	// task's events all the same.
	var after int64
	if req.TaskID != "" {
		if cur, err := s.store.Get(ctx, req.TaskID); err == nil && cur.Owner == owner {
			after = cur.Version
		}
	}
	t, err := s.SendMessage(ctx, owner, req)
	if err != nil {
		return nil, err
	}
	snapshot, backlog, live, err := s.Resubscribe(ctx, owner, t.ID, after)
	if err != nil {
		if r, ok := ctx.Value(requestKey{}).(*snap.Verified); ok && r.Claim.Pending() {
			return nil, err // nothing written (a key found): the retry is processed
		}
		// The message is stored: the task is the answer, with no events.
		return s.Committed(ctx, t.ID, t, "the stream's subscription", err)
	}
	// The request's replay record, when left to the handler, was
	// written with the task or the message (see SendMessage); one that
	// wrote nothing (an idempotency key found) writes it now, before the
	// first event: a copy of the request is then a duplicate at once,
	// not a second stream.
	if err := rememberClaim(ctx); err != nil {
		return nil, err
	}
	return s.follow(ctx, snapshot, backlog, live, emit, false)
}

// StreamResubscribe handles a tasks/resubscribe request ({taskId,
// afterVersion?}) from requester, who must own the task or be an operator
// (else 1001). It emits the current state of the task (a ProgressUpdate
// with Current), then the stored events after afterVersion (every stored
// event without it), then the live ones with no gap or duplicate, until
// the task is terminal, enters input_required again, or StreamMaxDuration
// passed; the task as it is then is returned for the final response. On a
// terminal task the stored events are emitted and the task is returned at
// once. Heartbeats, limits and the end of a stream are as for
// StreamMessage.
func (s *Service) StreamResubscribe(ctx context.Context, requester string, req *ResubscribeParams, emit func(any) error) (*Task, error) {
	ctx, end, err := s.startStream(ctx, requester)
	if err != nil {
		return nil, err
	}
	defer end()
	var after int64
	if req.AfterVersion != nil {
		after = *req.AfterVersion
	}
	snapshot, backlog, live, err := s.Resubscribe(ctx, requester, req.TaskID, after)
	if err != nil {
		return nil, err
	}
	// The request's replay record, when left to the handler, is written
	// before the first event: a stream refused for the limits (5002)
	// leaves the request's id unspent, and a copy of one under way is a
	// duplicate at once.
	if err := rememberClaim(ctx); err != nil {
		return nil, err
	}
	return s.follow(ctx, snapshot, backlog, live, emit, true)
}

// follow emits a stream: the current state (resubscribe), the backlog,
// then the live events, and returns the task as it is at the end. A
// message/stream ends at once when the task is terminal or
// input_required after the backlog; a resubscription ends at once only on
// a terminal task (one in input_required waits for what the operator or
// requester does next).
func (s *Service) follow(ctx context.Context, t *Task, backlog iter.Seq2[Event, error], live <-chan Event, emit func(any) error, resubscribe bool) (*Task, error) {
	f := &follower{emit: emit, id: t.ID, state: t.Status.State, last: t}
	if resubscribe {
		cur := statusUpdate(t.ID, t.Status, 0)
		if t.Status.Message == "" {
			cur.Message = "task is " + string(t.Status.State)
		}
		cur.Current = true
		if f.emit(cur) != nil {
			return s.finalTask(ctx, f.last)
		}
	}
	for ev, err := range backlog {
		if err != nil {
			if snap.CodeOf(err) == snap.CodeTaskNotFound {
				return nil, err // deleted by the retention meanwhile
			}
			// The stored events could not be read: the final response
			// carries the whole task, as after a dropped subscription.
			if ctx.Err() == nil {
				s.log.Warn("reading a task's events for its stream", "task", t.ID, "err", err)
			}
			return s.finalTask(ctx, f.last)
		}
		if f.event(ev) != nil {
			return s.finalTask(ctx, f.last)
		}
	}
	f.state = t.Status.State
	if st := t.Status.State; st.Terminal() || (!resubscribe && st == StateInputRequired) {
		return s.finalTask(ctx, f.last)
	}
	f.version = max(f.version, t.Version)
	heartbeat := time.NewTimer(s.streams.heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case ev, ok := <-live:
			if !ok {
				// The final event passed, ctx ended, or the broker
				// dropped a subscriber that fell behind: the final
				// response carries the whole task.
				return s.finalTask(ctx, f.last)
			}
			if ev.Version <= f.version {
				continue
			}
			if f.event(ev) != nil {
				return s.finalTask(ctx, f.last)
			}
			if ev.Kind == EventStatus && ev.Status != nil &&
				(ev.Status.State.Terminal() || ev.Status.State == StateInputRequired) {
				return s.finalTask(ctx, f.last)
			}
			heartbeat.Reset(s.streams.heartbeat)
		case <-heartbeat.C:
			if f.emit(&ProgressUpdate{TaskID: f.id, Progress: Progress(f.state), State: f.state,
				Message: "task still " + string(f.state), Heartbeat: true}) != nil {
				return s.finalTask(ctx, f.last)
			}
			heartbeat.Reset(s.streams.heartbeat)
		case <-ctx.Done():
			return s.finalTask(ctx, f.last)
		}
	}
}

// follower emits the events of one stream and tracks the task's state,
// the last version emitted, and the task as the events told it.
type follower struct {
	emit    func(any) error
	id      string
	state   State
	version int64
	// last is the stream's snapshot of the task with the later events
	// emitted applied (status, artifacts): the final answer when the
	// task cannot be read then. copied is set once last is the
	// follower's own copy.
	last   *Task
	copied bool
}

func (f *follower) event(ev Event) error {
	p := StreamPayload(ev, f.state)
	if p == nil {
		return nil
	}
	if ev.Kind == EventStatus {
		f.state = ev.Status.State
	}
	f.version = ev.Version
	f.apply(ev)
	return f.emit(p)
}

// apply brings f.last to ev, an event after it (one at or before its
// version is in it already). The snapshot is copied before its first
// change: the caller may share it.
func (f *follower) apply(ev Event) {
	if ev.Version <= f.last.Version {
		return
	}
	if !f.copied {
		f.last, f.copied = f.last.Clone(), true
	}
	f.last.Version = ev.Version
	switch {
	case ev.Kind == EventStatus && ev.Status != nil:
		f.last.Status = *ev.Status
	case ev.Kind == EventArtifact && ev.Artifact != nil:
		// An artifact of an id the task has takes its place
		// (Outcome.Replace).
		if i := slices.IndexFunc(f.last.Artifacts, func(a Artifact) bool { return a.ArtifactID == ev.Artifact.ArtifactID }); i >= 0 {
			f.last.Artifacts[i] = ev.Artifact.Clone()
		} else {
			f.last.Artifacts = append(f.last.Artifacts, ev.Artifact.Clone())
		}
	}
}

// finalTaskTimeout bounds the read of the task for a final response, which
// is made even after the stream's context ended.
const finalTaskTimeout = 10 * time.Second

// finalTask reads the task as it is for the final response; last is the
// task as the stream last knew it (its snapshot, the events it emitted
// applied). The stream's replay record is written by then (with its task
// or message, or before its first event), so a read that fails is not
// answered 5001, whose retry would be refused as a duplicate: the task
// is the answer, as it now stands or else as last known
// (Service.Committed).
func (s *Service) finalTask(ctx context.Context, last *Task) (*Task, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalTaskTimeout)
	defer cancel()
	cur, err := s.store.Get(rctx, last.ID)
	switch {
	case err == nil:
		return cur, nil
	case errors.Is(err, ErrNotFound):
		return nil, notFound(last.ID) // pruned meanwhile
	}
	return s.Committed(ctx, last.ID, last, "the final read of its stream", fmt.Errorf("tasks: stream: %w", err))
}
