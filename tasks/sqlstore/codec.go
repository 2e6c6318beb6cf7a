package sqlstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// taskColumns is the column list of every SELECT of a whole task, in the
// order of row.dest.
const taskColumns = "id, owner, context_id, state, status_ts, status_message, version, idempotency_key, created_at, history, artifacts, metadata"

// briefColumns is taskColumns with history and artifacts left unread
// (tasks.Filter.Brief): JSON null decodes to none.
const briefColumns = "id, owner, context_id, state, status_ts, status_message, version, idempotency_key, created_at, 'null', 'null', metadata"

// row is a task as stored: the queried fields as columns, history,
// artifacts and metadata as JSON.
type row struct {
	id, owner, contextID, state, statusMessage, idemKey string
	statusTS, version, createdAt                        int64
	history, artifacts, metadata                        []byte
}

func (r *row) dest() []any {
	return []any{&r.id, &r.owner, &r.contextID, &r.state, &r.statusTS, &r.statusMessage, &r.version, &r.idemKey,
		&r.createdAt, &r.history, &r.artifacts, &r.metadata}
}

// task decodes the row into a new task that shares nothing with it.
func (r *row) task() (*tasks.Task, error) {
	t := &tasks.Task{
		ID:        r.id,
		ContextID: r.contextID,
		Status: tasks.Status{
			State:     tasks.State(r.state),
			Timestamp: fromMicros(r.statusTS),
			Message:   r.statusMessage,
		},
		Owner:          r.owner,
		Version:        r.version,
		IdempotencyKey: r.idemKey,
		CreatedAt:      fromMicros(r.createdAt),
	}
	if err := json.Unmarshal(r.history, &t.History); err != nil {
		return nil, fmt.Errorf("sqlstore: task %s: history: %w", r.id, err)
	}
	if err := json.Unmarshal(r.artifacts, &t.Artifacts); err != nil {
		return nil, fmt.Errorf("sqlstore: task %s: artifacts: %w", r.id, err)
	}
	if err := json.Unmarshal(r.metadata, &t.Metadata); err != nil {
		return nil, fmt.Errorf("sqlstore: task %s: metadata: %w", r.id, err)
	}
	return t, nil
}

// encode fills the row from t. Nil and empty slices and maps stay apart
// (null and [] or {}), as MemoryStore keeps them.
func encode(t *tasks.Task) (*row, error) {
	r := &row{
		id:            t.ID,
		owner:         t.Owner,
		contextID:     t.ContextID,
		state:         string(t.Status.State),
		statusTS:      micros(t.Status.Timestamp),
		statusMessage: t.Status.Message,
		version:       t.Version,
		idemKey:       t.IdempotencyKey,
		createdAt:     micros(t.CreatedAt),
	}
	var err error
	if r.history, err = marshal(t.History); err != nil {
		return nil, fmt.Errorf("sqlstore: task %s: history: %w: %w", t.ID, tasks.ErrInvalidTask, err)
	}
	if r.artifacts, err = marshal(t.Artifacts); err != nil {
		return nil, fmt.Errorf("sqlstore: task %s: artifacts: %w: %w", t.ID, tasks.ErrInvalidTask, err)
	}
	if r.metadata, err = marshal(t.Metadata); err != nil {
		return nil, fmt.Errorf("sqlstore: task %s: metadata: %w: %w", t.ID, tasks.ErrInvalidTask, err)
	}
	return r, nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// marshal is json.Marshal without HTML escaping, so that the JSON a peer
// sent (a data part) is stored as close to its bytes as JSON allows.
func marshal(v any) ([]byte, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})), nil
}

// zeroMicros is the zero time.Time in microseconds since the epoch.
var zeroMicros = time.Time{}.UnixMicro()

// micros is how times are stored: microseconds since the Unix epoch, the
// precision the service keeps and PostgreSQL's. The zero time has a value
// of its own and comes back as the zero time.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time {
	if us == zeroMicros {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
