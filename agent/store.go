package agent

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/snapnode/snapnode/internal/dbtext"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks"
)

// The agent's tables, embedded one folder per dialect (see
// sqldb.Migrations) and recorded in snapnode_migrations as "agent"
// (older builds kept them in agent_migrations).
//
//go:embed migrations
var migrationFiles embed.FS

func migrations() sqldb.Migrations {
	return sqldb.Embedded(migrationFiles, "migrations", "agent").Replacing("agent_migrations")
}

// Errors of the store.
var (
	// ErrNoJob: no job has this task id.
	ErrNoJob = errors.New("agent: no such job")
	// ErrForgotten: the job is being forgotten (Forget), its history
	// deleted with its task; it is also ErrNoJob.
	ErrForgotten = fmt.Errorf("%w: it was forgotten, with its history, after its task was deleted", ErrNoJob)
	// ErrLeaseLost: the job is no longer this process's (its lease lapsed
	// and another claimed it, or it was decided elsewhere).
	ErrLeaseLost = errors.New("agent: lease lost")
)

// Store keeps jobs, their interactions and recovery points in the node's
// database (SQLite or PostgreSQL), beside the tasks.
type Store struct {
	db *sqldb.DB
	d  *sqldb.Dialect
	// sealer opens and seals sensitive jobs' archive segments (UseKey).
	sealer *Sealer
	// queued is the count of the Queue on this store (nil before one is
	// made): the jobs that wait for a slot or are worked on, by
	// requester, which the store follows as it creates jobs and moves
	// them in and out of the queue.
	queued atomic.Pointer[tasks.LiveCount]
	// maxInput bounds a job's pending input, in bytes (see
	// SetMaxPendingInput).
	maxInput atomic.Int64
	// log warns of what the store drops (SetLogger); nil: nothing.
	log atomic.Pointer[slog.Logger]
}

// SetLogger has the store warn on l of the records to cancel it drops (see
// MaxCancelsPerJob and Forget): work elsewhere the node will not cancel.
func (s *Store) SetLogger(l *slog.Logger) {
	s.log.Store(l)
}

// DefaultMaxPendingInput is the default bound of a job's pending input
// (see Store.SetMaxPendingInput).
const DefaultMaxPendingInput = 1 << 20

// SetMaxPendingInput bounds the pending input of each job (what its next
// model call is told first: the requester's messages and operators'
// decisions since its last step) to n bytes; n < 1 means
// DefaultMaxPendingInput.
func (s *Store) SetMaxPendingInput(n int) {
	if n < 1 {
		n = DefaultMaxPendingInput
	}
	s.maxInput.Store(int64(n))
}

// OpenStore returns the job store on db, after bringing its tables up to
// date.
func OpenStore(ctx context.Context, db *sqldb.DB) (*Store, error) {
	if err := db.Migrate(ctx, migrations()); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return &Store{db: db, d: db.Dialect}, nil
}

const jobColumns = `task_id, requester, description, status, phase, lease_holder, lease_until, steps,
	cost_cents, seconds, prompt_tokens, completion_tokens, retries, history_bytes, next_seq,
	pending_input, recovery_seq, reason, created_at, updated_at, settled, review_seq, shown, told`

// Create stores a new job and reports whether it did: a job of the same
// task is left as it is.
func (s *Store) Create(ctx context.Context, j *Job) (bool, error) {
	created, err := s.exec(ctx, "create", j.TaskID, `INSERT INTO agent_jobs (`+jobColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING`,
		j.TaskID, dbtext.Clean(j.Requester), dbtext.Clean(j.Description), string(j.Status), j.Phase, j.LeaseHolder, sqldb.Micros(j.LeaseUntil),
		j.Steps, j.CostCents, j.Seconds, j.PromptTokens, j.CompletionTokens, j.Retries, j.HistoryBytes,
		j.NextSeq, dbtext.Clean(j.PendingInput), j.RecoverySeq, dbtext.Clean(j.Reason), sqldb.Micros(j.CreatedAt), sqldb.Micros(j.UpdatedAt), j.ReviewSeq, dbtext.Clean(j.Shown), j.Told)
	if err != nil {
		return false, err
	}
	if created {
		j.settled = true // as stored: a new job's task shows it (submitted)
		s.moved(dbtext.Clean(j.Requester), Draft, j.Status)
	}
	return created, nil
}

// queued reports whether a job in s waits for a slot or is worked on
// (PENDING, RUNNING, REVIEWING: the statuses Runnable looks at), what a
// Queue's bounds count.
func (s Status) queued() bool { return s == Pending || s == Running || s == Reviewing }

// moved counts a job of requester that went from status was to now in or
// out of the queue's count.
func (s *Store) moved(requester string, was, now Status) {
	switch c := s.queued.Load(); {
	case !was.queued() && now.queued():
		c.Add(requester)
	case was.queued() && !now.queued():
		c.Drop(requester)
	}
}

// statusForWrite reads the status and requester of the job of taskID in
// tx, locking its row on PostgreSQL (SQLite's write transaction is the
// database's only writer) until tx ends, so that the write that follows
// knows what it moves the job from.
func (s *Store) statusForWrite(ctx context.Context, tx *sql.Tx, taskID string) (status Status, requester string, err error) {
	err = tx.QueryRowContext(ctx, s.d.Rebind(`SELECT status, requester FROM agent_jobs WHERE task_id = ?`+s.d.ForUpdate()), taskID).Scan(&status, &requester)
	return status, requester, err
}

// byteLength is the SQL of the length in bytes of a text column (LENGTH
// counts characters in both dialects).
func (s *Store) byteLength(col string) string {
	if s.d.Name() == "postgres" {
		return "octet_length(" + col + ")"
	}
	return "LENGTH(CAST(" + col + " AS BLOB))"
}

type scanner interface{ Scan(dest ...any) error }

func scanJob(sc scanner) (*Job, error) {
	var (
		j                       Job
		status                  string
		lease, created, updated int64
		settled                 int64
	)
	err := sc.Scan(&j.TaskID, &j.Requester, &j.Description, &status, &j.Phase, &j.LeaseHolder, &lease, &j.Steps,
		&j.CostCents, &j.Seconds, &j.PromptTokens, &j.CompletionTokens, &j.Retries, &j.HistoryBytes, &j.NextSeq,
		&j.PendingInput, &j.RecoverySeq, &j.Reason, &created, &updated, &settled, &j.ReviewSeq, &j.Shown, &j.Told)
	if err != nil {
		return nil, err
	}
	j.Status, j.LeaseUntil, j.CreatedAt, j.UpdatedAt = Status(status), sqldb.FromMicros(lease), sqldb.FromMicros(created), sqldb.FromMicros(updated)
	j.settled = settled != 0
	return &j, nil
}

// Get returns the job of a task, or ErrNoJob (ErrForgotten for a job
// being forgotten: see Forget).
func (s *Store) Get(ctx context.Context, taskID string) (*Job, error) {
	var forgotten int64
	row := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT `+jobColumns+`, forgotten FROM agent_jobs WHERE task_id = ?`), taskID)
	j, err := scanJob(scanFunc(func(dest ...any) error { return row.Scan(append(dest, &forgotten)...) }))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, ErrNoJob
	case err != nil:
		return nil, fmt.Errorf("agent: read job %s: %w", taskID, err)
	case forgotten != 0:
		return nil, ErrForgotten
	}
	return j, nil
}

// scanFunc is a scanner of a func.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// PendingInput returns what the job's next model call is told first.
func (s *Store) PendingInput(ctx context.Context, taskID string) (string, error) {
	var in string
	err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT pending_input FROM agent_jobs WHERE task_id = ?`), taskID).Scan(&in)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNoJob
	}
	if err != nil {
		return "", fmt.Errorf("agent: read job %s: %w", taskID, err)
	}
	return in, nil
}

// StepInput returns what the job's next model call is told first (see
// PendingInput) and where that text ends among all the input the job was
// ever given (to pass back as Save.ConsumedEnd), what its model last
// recorded of the job (see KeepSent; a nil Record for none), and how many
// of its task's messages it was given (Job.Told), in one read.
func (s *Store) StepInput(ctx context.Context, taskID string) (pending string, end int64, sent SentStep, told int, err error) {
	var (
		kept     string
		answered int
	)
	err = s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT pending_input, input_end, model_sent, model_sent_answered, told FROM agent_jobs WHERE task_id = ?`), taskID).
		Scan(&pending, &end, &kept, &answered, &told)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, SentStep{}, 0, ErrNoJob
	}
	if err != nil {
		return "", 0, SentStep{}, 0, fmt.Errorf("agent: read job %s: %w", taskID, err)
	}
	if kept != "" {
		sent = SentStep{Record: []byte(kept), Answered: answered != 0}
	}
	return pending, end, sent, told, nil
}

// SentStep is what a job's model last recorded of the job with KeepSent
// (Prompt.Sent), and whether the step it recorded was answered since
// (Prompt.SentAnswered).
type SentStep struct {
	// Record is what the model recorded; nil: nothing.
	Record []byte
	// Answered reports that a write recorded the model's answer since
	// the record, or moved the job out of RUNNING and REVIEWING (it
	// waited for a human, was queued again, or ended).
	Answered bool
}

// KeepSent records sent, what the job's model must know again of the job
// should the node stop (a delegate's task on another agent, and the
// idempotency key and message id of the step it is about to send), while
// holder holds the job (else ErrLeaseLost). The record stays, given back
// to each later step of the job (StepInput, Prompt.Sent), until the model
// records another; it is marked answered (Prompt.SentAnswered) by the
// write that records the job's next answer, or moves the job out of
// RUNNING and REVIEWING (it waits for a human, or ended): only a step
// tried again after a failed call, or by the node that claims the job
// after a stop, is sent again as the same step. A job that succeeds
// forgets it (its model's work ended with its answer); the write that
// ends a job otherwise (canceled, halted, its task failed) or rewinds it
// to a checkpoint (Save.Rewound) gives it up to be canceled instead: no
// later step is given it, and it joins the job's records to cancel
// (CanceledSent), each kept apart until its model's work elsewhere is
// canceled: a process takes it (TakeCanceledSent), sends the cancel, and
// forgets it once answered (ForgetCanceledSent). A job's records to
// cancel never take each other's place: a job rewound while the cancel
// of its earlier work is pending, which then ends, has both.
func (s *Store) KeepSent(ctx context.Context, taskID, holder string, sent []byte) error {
	return s.KeepSentCanceling(ctx, taskID, holder, sent, nil)
}

// KeepSentCanceling is KeepSent giving cancel (when not empty), an
// earlier record of the job's model whose work elsewhere the job no
// longer goes on with, up to be canceled in the same write (see
// CanceledSent): a step given up whose cancel its peer did not answer.
func (s *Store) KeepSentCanceling(ctx context.Context, taskID, holder string, sent, cancel []byte) error {
	var dropped int64
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		dropped = 0 // the transaction may run again
		n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_jobs SET model_sent = ?, model_sent_answered = 0 WHERE task_id = ? AND lease_holder = ?`),
			dbtext.Clean(string(sent)), taskID, holder))
		if err != nil {
			return err
		}
		if n != 1 {
			return ErrLeaseLost
		}
		dropped, err = s.giveUpSent(ctx, tx, taskID, dbtext.Clean(string(cancel)))
		return err
	})
	if err != nil {
		return fmt.Errorf("agent: keep the sent step of job %s: %w", taskID, err)
	}
	s.warnDropped(taskID, dropped, "past its bound")
	return nil
}

// MaxCancelsPerJob bounds the records of one job given up to be canceled
// and not forgotten yet (CanceledSent). A job that gives up another past
// it (rewound again and again while its peer does not answer the
// cancels) drops its oldest, whose work elsewhere is then not canceled
// by the node, and the store warns of it (SetLogger); each record is
// itself tried at most MaxCancelTries times.
const MaxCancelsPerJob = 16

// giveUpSent adds sent (clean; "": nothing), a record of the job of
// taskID, to its records to cancel in tx, unless it is there already;
// past MaxCancelsPerJob the job's oldest go. The caller holds the job's
// row (its update, or a read for update, came first in tx): two writes
// of one job give up their records one after the other. It returns how
// many of the job's records the bound dropped, to be warned of once tx
// commits (warnDropped); the job's row counts them (its history's
// cancels_dropped).
func (s *Store) giveUpSent(ctx context.Context, tx *sql.Tx, taskID, sent string) (int64, error) {
	if sent == "" {
		return 0, nil
	}
	n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO agent_sent_cancels (task_id, sent)
		SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM agent_sent_cancels WHERE task_id = ? AND sent = ?)`),
		taskID, sent, taskID, sent))
	if err != nil || n == 0 {
		return 0, err
	}
	dropped, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(`DELETE FROM agent_sent_cancels WHERE task_id = ? AND id NOT IN (
		SELECT id FROM agent_sent_cancels WHERE task_id = ? ORDER BY id DESC LIMIT ?)`), taskID, taskID, MaxCancelsPerJob))
	if err != nil || dropped == 0 {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_jobs SET cancels_dropped = cancels_dropped + ? WHERE task_id = ?`), dropped, taskID); err != nil {
		return 0, err
	}
	return dropped, nil
}

// warnDropped warns (SetLogger) that n records to cancel of the job of
// taskID were dropped, why: the work elsewhere they name is not canceled
// by the node.
func (s *Store) warnDropped(taskID string, n int64, why string) {
	if l := s.log.Load(); l != nil && n > 0 {
		l.Warn("agent: dropped records of work elsewhere to cancel ("+why+"): that work is not canceled by the node; cancel it on the peer if it matters",
			"task", taskID, "dropped", n)
	}
}

// CanceledRecord is a job and a record of its model (KeepSent), given up
// to be canceled when the job ended other than in success or was rewound,
// or by the model: its model's work elsewhere is not canceled yet.
type CanceledRecord struct {
	TaskID string
	Sent   []byte
}

// CanceledSent returns up to limit records given up to be canceled (see
// KeepSent) and not forgotten yet, oldest first: their model's work
// elsewhere (a delegate's task) was not canceled, as when the job ended
// while the node was down, or the node stopped before it canceled it; or
// a process took one and is canceling it now (TakeCanceledSent).
func (s *Store) CanceledSent(ctx context.Context, limit int) ([]CanceledRecord, error) {
	return s.canceledSent(ctx, `ORDER BY id LIMIT ?`, limit)
}

// CanceledSentUntaken is CanceledSent without the records another
// process's take holds at now (TakeCanceledSent): those a reconcile pass
// can take. A page full of records whose cancel is in flight, or whose
// peer does not answer, so holds up none after it.
func (s *Store) CanceledSentUntaken(ctx context.Context, now time.Time, limit int) ([]CanceledRecord, error) {
	return s.canceledSent(ctx, `WHERE taken_until < ? ORDER BY id LIMIT ?`, sqldb.Micros(now), limit)
}

// SentToCancel returns the records of the job of taskID given up to be
// canceled and not forgotten yet (see CanceledSent), oldest first; none
// when there are none, or no such job.
func (s *Store) SentToCancel(ctx context.Context, taskID string) ([]CanceledRecord, error) {
	return s.canceledSent(ctx, `WHERE task_id = ? ORDER BY id LIMIT ?`, taskID, MaxCancelsPerJob)
}

// canceledSent lists the records to cancel of where (the condition,
// order and limit, of args).
func (s *Store) canceledSent(ctx context.Context, where string, args ...any) ([]CanceledRecord, error) {
	var out []CanceledRecord
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT task_id, sent FROM agent_sent_cancels `+where), args...)) {
		var (
			c    CanceledRecord
			sent string
		)
		if err == nil {
			err = rows.Scan(&c.TaskID, &sent)
		}
		if err != nil {
			return nil, fmt.Errorf("agent: records of work to cancel: %w", err)
		}
		c.Sent = []byte(sent)
		out = append(out, c)
	}
	return out, nil
}

// TakeCanceledSent marks sent, a record of the job of taskID given up to
// be canceled, taken until until: the caller is sending the cancel of its
// work elsewhere, and no other process takes it meanwhile. It returns how
// many times the record was taken, this take included (0: not taken: the
// job has no such record to cancel, or another process's take of it
// holds at now). The record stays until the cancel is answered
// (ForgetCanceledSent): a process that stops or crashes before leaves it
// to be taken again, by any process, once until passed.
func (s *Store) TakeCanceledSent(ctx context.Context, taskID string, sent []byte, now, until time.Time) (int, error) {
	var tries int
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		tries = 0
		n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_sent_cancels SET taken_until = ?, tries = tries + 1
			WHERE task_id = ? AND sent = ? AND taken_until < ?`),
			sqldb.Micros(until), taskID, string(sent), sqldb.Micros(now)))
		if err != nil || n != 1 {
			return err
		}
		return tx.QueryRowContext(ctx, s.d.Rebind(`SELECT tries FROM agent_sent_cancels WHERE task_id = ? AND sent = ?`), taskID, string(sent)).Scan(&tries)
	})
	if err != nil {
		return 0, fmt.Errorf("agent: take the record to cancel of job %s: %w", taskID, err)
	}
	return tries, nil
}

// ForgetCanceledSent forgets sent, a record of the job of taskID given up
// to be canceled, once its work elsewhere was canceled (the peer answered
// the cancel) or given up. It reports false when the job has no such
// record to cancel.
func (s *Store) ForgetCanceledSent(ctx context.Context, taskID string, sent []byte) (bool, error) {
	return s.exec(ctx, "forget the record to cancel of", taskID, deleteSentCancel, taskID, string(sent))
}

// deleteSentCancel forgets one record to cancel of a job: its task, the
// record (ForgetCanceledSent, GiveUpCanceledSent).
const deleteSentCancel = `DELETE FROM agent_sent_cancels WHERE task_id = ? AND sent = ?`

// GiveUpCanceledSent forgets sent, a record of the job of taskID given up
// to be canceled, after its last try (MaxCancelTries) its peer did not
// answer, and counts it in the job's history (cancels_given_up) in the
// same write: work elsewhere the node did not cancel. It reports false,
// counting nothing, when the job has no such record (another process
// gave it up or forgot it first).
func (s *Store) GiveUpCanceledSent(ctx context.Context, taskID string, sent []byte) (bool, error) {
	var gone bool
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(deleteSentCancel), taskID, string(sent)))
		if gone = n > 0; err != nil || !gone {
			return err
		}
		_, err = tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_jobs SET cancels_given_up = cancels_given_up + ? WHERE task_id = ?`), n, taskID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("agent: give up the record to cancel of job %s: %w", taskID, err)
	}
	return gone, nil
}

// Candidate is a job that waits for a claim.
type Candidate struct{ TaskID, Requester string }

// Runnable returns up to limit jobs that wait for work (PENDING, or
// RUNNING or REVIEWING with a lapsed lease): the oldest perRequester of each requester,
// the oldest of every requester first, so that one requester's many jobs
// do not fill the list.
func (s *Store) Runnable(ctx context.Context, now time.Time, perRequester, limit int) ([]Candidate, error) {
	var out []Candidate
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT task_id, requester FROM (
			SELECT task_id, requester, created_at,
				ROW_NUMBER() OVER (PARTITION BY requester ORDER BY created_at, task_id) AS rank
			FROM agent_jobs WHERE status IN (?, ?, ?) AND lease_until < ?
		) AS waiting WHERE rank <= ? ORDER BY rank, created_at, task_id LIMIT ?`),
		string(Pending), string(Running), string(Reviewing), sqldb.Micros(now), perRequester, limit)) {
		var c Candidate
		if err == nil {
			err = rows.Scan(&c.TaskID, &c.Requester)
		}
		if err != nil {
			return nil, fmt.Errorf("agent: runnable jobs: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Claim makes the job holder's until then, if it is runnable and nobody
// holds it, and reports whether it did: of two processes claiming one job,
// one wins.
func (s *Store) Claim(ctx context.Context, taskID, holder string, now, until time.Time) (bool, error) {
	return s.exec(ctx, "claim", taskID, `UPDATE agent_jobs SET lease_holder = ?, lease_until = ?
		WHERE task_id = ? AND status IN (?, ?, ?) AND lease_until < ?`,
		holder, sqldb.Micros(until), taskID, string(Pending), string(Running), string(Reviewing), sqldb.Micros(now))
}

// Renew extends holder's lease; false when the job is no longer its.
func (s *Store) Renew(ctx context.Context, taskID, holder string, until time.Time) (bool, error) {
	return s.exec(ctx, "renew", taskID, `UPDATE agent_jobs SET lease_until = ? WHERE task_id = ? AND lease_holder = ?`,
		sqldb.Micros(until), taskID, holder)
}

// Release gives up holder's lease at once (the job stays as it is).
func (s *Store) Release(ctx context.Context, taskID, holder string) error {
	_, err := s.exec(ctx, "release", taskID, `UPDATE agent_jobs SET lease_until = 0, lease_holder = ''
		WHERE task_id = ? AND lease_holder = ?`, taskID, holder)
	return err
}

// Settle records that the job's task shows status, the job's status when
// the task was written; a job that has moved on since stays unsettled.
func (s *Store) Settle(ctx context.Context, taskID string, status Status) error {
	_, err := s.exec(ctx, "settle", taskID, `UPDATE agent_jobs SET settled = 1 WHERE task_id = ? AND status = ?`, taskID, string(status))
	return err
}

// Unsettled returns up to limit jobs whose task may not show their
// status (a node stopped between the job's write and its task's), oldest
// first, leaving out those a live lease holds (their node is writing the
// task now).
func (s *Store) Unsettled(ctx context.Context, now time.Time, limit int) ([]*Job, error) {
	return s.jobs(ctx, `WHERE settled = 0 AND lease_until < ? ORDER BY updated_at, task_id LIMIT ?`, sqldb.Micros(now), limit)
}

// Waiting returns up to limit jobs that wait for a human (their task may
// have been canceled meanwhile) whose task id comes after after, in task
// id order: a caller pages through all of them, limit at a time.
func (s *Store) Waiting(ctx context.Context, after string, limit int) ([]*Job, error) {
	return s.jobs(ctx, `WHERE status = ? AND task_id > ? ORDER BY task_id LIMIT ?`, string(InterventionRequired), after, limit)
}

// Ended returns up to limit jobs that ended (SUCCESS, CANCELED or halted)
// before before and after the job after (by the time they ended, then task
// id; the zero Job starts), oldest first: a caller pages through them,
// limit at a time.
func (s *Store) Ended(ctx context.Context, before time.Time, after *Job, limit int) ([]*Job, error) {
	return s.jobs(ctx, s.endedWhere(), sqldb.Micros(before), sqldb.Micros(after.UpdatedAt), sqldb.Micros(after.UpdatedAt), after.TaskID, limit)
}

// endedJobs is the condition of a job that ended (SUCCESS, CANCELED or
// halted), written out as in the partial index agent_jobs_ended's
// condition, which a query must repeat word for word to use the index.
const endedJobs = `status IN ('SUCCESS', 'CANCELED', 'HALTED_COST', 'HALTED_TIME')`

// endedWhere is Ended's condition, order and limit, of five ? (before,
// after's time twice, after's task id, limit).
func (s *Store) endedWhere() string {
	// SQLite's planner, without statistics, prefers the runnable
	// index's status and sorts every ended job; it is told which index
	// to read.
	hint := ""
	if s.d.Name() == "sqlite" {
		hint = "INDEXED BY agent_jobs_ended "
	}
	return hint + `WHERE ` + endedJobs + `
		AND updated_at < ? AND (updated_at > ? OR updated_at = ? AND task_id > ?)
		ORDER BY updated_at, task_id LIMIT ?`
}

// Forget deletes the job of taskID and everything stored of it: its
// interactions, recovery points, history archive and records to cancel
// (CanceledSent). It reports whether
// there was a job; one that has not ended is kept (false). A long history
// goes a hundred rows a transaction, the job's own row last, so that no
// one transaction holds the database's writer for long; the job is first
// marked forgotten, in a transaction of its own, so that from then on it
// reads as forgotten (Get's ErrForgotten), never as a history missing
// some of its rows, and a Forget cut short is finished by the next.
func (s *Store) Forget(ctx context.Context, taskID string) (bool, error) {
	if ok, err := s.exec(ctx, "forget", taskID, `UPDATE agent_jobs SET forgotten = 1 WHERE task_id = ? AND `+endedJobs, taskID); err != nil || !ok {
		return false, err
	}
	for _, t := range []struct{ table, key string }{{"agent_interactions", "seq"}, {"agent_history_segments", "idx"}, {"agent_recovery_points", "seq"}, {"agent_sent_cancels", "id"}} {
		q := s.d.Rebind(`DELETE FROM ` + t.table + ` WHERE task_id = ? AND ` + t.key + ` IN (SELECT ` + t.key + ` FROM ` + t.table + ` WHERE task_id = ? ORDER BY ` + t.key + ` LIMIT 100)`)
		var gone, deleted int64
		for more := true; more; {
			err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				n, err := sqldb.Affected(tx.ExecContext(ctx, q, taskID, taskID))
				more, deleted = n > 0, n
				return err
			})
			if err != nil {
				return false, fmt.Errorf("agent: forget job %s: %s: %w", taskID, t.table, err)
			}
			gone += deleted
		}
		if t.table == "agent_sent_cancels" {
			s.warnDropped(taskID, gone, "the job was forgotten")
		}
	}
	return s.exec(ctx, "forget", taskID, `DELETE FROM agent_jobs WHERE task_id = ? AND forgotten = 1`, taskID)
}

func (s *Store) jobs(ctx context.Context, where string, args ...any) ([]*Job, error) {
	var out []*Job
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT `+jobColumns+` FROM agent_jobs `+where), args...)) {
		var j *Job
		if err == nil {
			j, err = scanJob(rows)
		}
		if err != nil {
			return nil, fmt.Errorf("agent: list jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, nil
}

// CountByStatus returns how many jobs are in each status; statuses with
// none may be left out.
func (s *Store) CountByStatus(ctx context.Context) (map[Status]int64, error) {
	out, err := sqldb.IntsByKey[Status](s.db.R.QueryContext(ctx, `SELECT status, COUNT(*) FROM agent_jobs GROUP BY status`))
	if err != nil {
		return nil, fmt.Errorf("agent: count jobs: %w", err)
	}
	return out, nil
}

// QueuedByRequester returns how many jobs of each requester wait for a
// slot or are worked on (their status is one Runnable looks at), with
// one grouped query from the runnable index: what Queue.Recount reads.
func (s *Store) QueuedByRequester(ctx context.Context) (map[string]int, error) {
	byRequester, err := sqldb.IntsByKey[string](s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT requester, COUNT(*)
		FROM agent_jobs WHERE status IN (?, ?, ?) GROUP BY requester`), string(Pending), string(Running), string(Reviewing)))
	if err != nil {
		return nil, fmt.Errorf("agent: count queued jobs: %w", err)
	}
	out := make(map[string]int, len(byRequester))
	for who, n := range byRequester {
		out[who] = int(n)
	}
	return out, nil
}

// ReleaseHolder frees every job holder holds, its resumes' included (see
// ResumeHolder), and returns how many: for a process that starts under
// the holder name of a previous, dead one.
func (s *Store) ReleaseHolder(ctx context.Context, holder string) (int64, error) {
	var n int64
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		n, err = sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_jobs SET lease_until = 0, lease_holder = '' WHERE lease_holder IN (?, ?)`), holder, ResumeHolder(holder)))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("agent: release the jobs of %s: %w", holder, err)
	}
	return n, nil
}

// ResumeHolder is the name in which the process named holder holds the
// jobs it resumes: not holder itself, whose lease a job it ran gives up
// when it stops (Release), which may come after a resume has claimed the
// job.
func ResumeHolder(holder string) string { return holder + "/resume" }

// exec runs the statement q (with ? placeholders) on the job of taskID in
// a write transaction and reports whether it changed one row; an error
// names verb and the job.
func (s *Store) exec(ctx context.Context, verb, taskID, q string, args ...any) (bool, error) {
	var ok bool
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(q), args...))
		ok = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("agent: %s job %s: %w", verb, taskID, err)
	}
	return ok, nil
}

// Save is one write of a job: its row, and optionally an interaction
// (inserted, or replaced when it has that sequence already) and a recovery
// point, in one transaction. With holder set the write happens only while
// holder holds the job (else ErrLeaseLost); with expect set, only while
// the job is in that status (else ErrLeaseLost too: someone else moved it).
type Save struct {
	Job *Job
	// Earlier is an interaction stored before and completed since (its
	// observation), written in the same transaction; nil for none.
	Earlier     *Interaction
	Interaction *Interaction
	Recovery    *RecoveryPoint
	Holder      string
	Expect      Status
	// Consumed is the pending input the stored answer was given, and
	// ConsumedEnd where it ended (both as StepInput read them): it is
	// taken off the job's pending input, and input added since stays,
	// even when the bound dropped the oldest of it meanwhile.
	Consumed    string
	ConsumedEnd int64
	// Unsettled marks the job's task as not yet showing the job's status
	// (see Settle, Unsettled).
	Unsettled bool
	// Input is added to the job's pending input, as AddInput adds it, in
	// the same transaction; "" for none.
	Input string
	// LeaseUntil, when set, makes the write take the job's lease for
	// Holder until then, and happen only while the job is not DRAFT under
	// another holder's lease live at Now (else ErrLeaseLost): a resume's
	// claim, which another process's resume of the job cannot share. The
	// lease of a job in any other status is taken whoever held it (a job
	// waiting for a human whose runner has not yet let it go), once the
	// job is settled: a runner that saved the job waiting has yet to
	// write its task, and that late write would show the resumed job's
	// task input_required.
	LeaseUntil, Now time.Time
	// Release gives the job's lease up in the same write.
	Release bool
	// Seen, when not nil, is where the input the job's last model call
	// was told ended (StepInput's end). A write that makes the job wait
	// for a human (INTERVENTION_REQUIRED) finds then whether input was
	// added since, during the step (a requester's message): if so, it
	// is a message on a waiting job, which goes back in the queue (see
	// AddInput): the job is written PENDING, its lease given up, and
	// Job.Status says so once the write is done.
	Seen *int64
	// Rewound marks the write that queues a job rewound to a checkpoint
	// (Runtime.ResumeFrom): the model's record of the job is given up to
	// be canceled, and its next step starts afresh (see KeepSent).
	Rewound bool
}

// answered reports whether w ends the step the job's model recorded as
// sent (KeepSent), which is then not sent again as the same step: it
// records an answer of the model, or the job is no longer worked on (it
// waits for a human, ended, or is queued again afresh).
func (w *Save) answered() bool {
	if w.Interaction != nil && w.Interaction.Response.Status == ResponseSuccess {
		return true
	}
	return w.Job.Status != Running && w.Job.Status != Reviewing
}

// leavesSent reports whether w leaves the work the model's record
// (KeepSent) names, which no later step continues: the job ended, or was
// rewound. Unless it succeeded, the record is given up to be canceled.
func (w *Save) leavesSent() bool {
	return w.Job.Status.Terminal() || w.Rewound
}

// Write applies w.
func (s *Store) Write(ctx context.Context, w Save) error {
	historyBytes, status := w.Job.HistoryBytes, w.Job.Status
	var moved func()
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// The transaction may run again.
		w.Job.HistoryBytes, w.Job.Status = historyBytes, status
		var err error
		moved, err = s.writeTx(ctx, tx, w)
		return err
	})
	if err == nil {
		moved() // committed: the queue's count follows
	}
	if err != nil {
		w.Job.HistoryBytes, w.Job.Status = historyBytes, status // nothing was written
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("agent: save job %s: %w", w.Job.TaskID, err)
	}
	return nil
}

// WriteTx is Write inside tx, a transaction of the node's database that
// the caller commits (the executor's first commit of a proposal, see
// executor.Request.Also): nothing of it is durable unless tx commits. It
// adds the written interactions' bytes to w.Job.HistoryBytes; should tx
// not commit, the caller puts the figure back. A job it moves in or out of
// the queue (a status of PENDING, RUNNING or REVIEWING, or another) is
// counted so at once, the store not seeing tx commit: should tx roll
// back, the queue's count is off by one until its next Recount (the
// executor's commits write a job in the status it has).
func (s *Store) WriteTx(ctx context.Context, tx *sql.Tx, w Save) error {
	moved, err := s.writeTx(ctx, tx, w)
	if err != nil {
		return err
	}
	moved()
	return nil
}

// writeTx is WriteTx, returning moved to call once tx committed: it
// counts the job in or out of the queue, if it moved.
func (s *Store) writeTx(ctx context.Context, tx *sql.Tx, w Save) (moved func(), err error) {
	j := w.Job
	// What the job moves from: the status the write expects, or as
	// read (only a Queue's count needs it).
	was, requester := w.Expect, dbtext.Clean(j.Requester)
	if was == "" && s.queued.Load() != nil {
		if was, requester, err = s.statusForWrite(ctx, tx, j.TaskID); errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("agent: save job %s: %w", j.TaskID, ErrLeaseLost)
		} else if err != nil {
			return nil, err
		}
	}
	var dropped int64
	if err := s.writeJob(ctx, tx, w, &dropped); err != nil {
		return nil, err
	}
	return func() {
		s.moved(requester, was, j.Status)
		s.warnDropped(j.TaskID, dropped, "past its bound")
	}, nil
}

// writeJob is WriteTx's writing; *dropped is set to how many records to
// cancel the bound dropped (see giveUpSent).
func (s *Store) writeJob(ctx context.Context, tx *sql.Tx, w Save, dropped *int64) error {
	j := w.Job
	if w.Seen != nil && j.Status == InterventionRequired {
		// The row stays locked until tx ends (on PostgreSQL; SQLite's
		// write transaction is the only writer): input added after
		// this read finds the job waiting, and resumes it (AddInput).
		var end int64
		err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT input_end FROM agent_jobs WHERE task_id = ?`+s.d.ForUpdate()), j.TaskID).Scan(&end)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("agent: save job %s: %w", j.TaskID, ErrLeaseLost)
		}
		if err != nil {
			return err
		}
		if end > *w.Seen {
			// Told nothing of the wait, the task shows the job at
			// work: settled as PENDING.
			j.Status, w.Release, w.Unsettled = Pending, true, false
		}
	}
	for _, it := range []*Interaction{w.Earlier, w.Interaction} {
		if it == nil {
			continue
		}
		body, err := encodeInteraction(it)
		if err != nil {
			return err
		}
		// The interaction's body replaces any stored under its sequence;
		// the job counts the difference. A new interaction is usually
		// new to the store too: one statement inserts it.
		var old int64
		if it == w.Interaction {
			n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO agent_interactions (task_id, seq, body) VALUES (?, ?, ?)
				ON CONFLICT (task_id, seq) DO NOTHING`), j.TaskID, it.Sequence, string(body)))
			if err != nil {
				return err
			}
			if n == 1 {
				j.HistoryBytes += int64(len(body))
				continue
			}
		}
		err = tx.QueryRowContext(ctx, s.d.Rebind(`SELECT `+s.byteLength("body")+` FROM agent_interactions WHERE task_id = ? AND seq = ?`),
			j.TaskID, it.Sequence).Scan(&old)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO agent_interactions (task_id, seq, body) VALUES (?, ?, ?)`),
				j.TaskID, it.Sequence, string(body))
		case err == nil:
			_, err = tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_interactions SET body = ? WHERE task_id = ? AND seq = ?`),
				string(body), j.TaskID, it.Sequence)
		}
		if err != nil {
			return err
		}
		j.HistoryBytes += int64(len(body)) - old
	}
	if w.Recovery != nil {
		rp, err := json.Marshal(w.Recovery)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO agent_recovery_points (task_id, seq, body) VALUES (?, ?, ?)
			ON CONFLICT (task_id, seq) DO UPDATE SET body = excluded.body`), j.TaskID, w.Recovery.Sequence, string(rp)); err != nil {
			return err
		}
	}
	// The model's record, which a write that ends the job other than in
	// success or rewinds it gives up to be canceled (KeepSent): read
	// with the row locked, so that the update below clears the record
	// given up.
	giveUp, sent := w.leavesSent() && j.Status != Success, ""
	if giveUp {
		err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT model_sent FROM agent_jobs WHERE task_id = ?`+s.d.ForUpdate()), j.TaskID).Scan(&sent)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("agent: save job %s: %w", j.TaskID, ErrLeaseLost)
		}
		if err != nil {
			return err
		}
	}
	// The runtime's columns. The lease is the dispatcher's (Claim, Renew,
	// Release) and the pending input the queue's (AddInput): a write here
	// never undoes either. The input the answer was given is taken off the
	// pending input (consume, below); what was added since stays.
	q := `UPDATE agent_jobs SET description = ?, status = ?, phase = ?, steps = ?,
		cost_cents = ?, seconds = ?, prompt_tokens = ?, completion_tokens = ?, retries = ?, history_bytes = ?,
		next_seq = ?, recovery_seq = ?, reason = ?, updated_at = ?, review_seq = ?, shown = ?,
		settled = CASE WHEN ? THEN 0 ELSE settled END,
		model_sent = CASE WHEN ? THEN '' ELSE model_sent END,
		model_sent_answered = CASE WHEN ? THEN 1 ELSE model_sent_answered END`
	args := []any{dbtext.Clean(j.Description), string(j.Status), j.Phase, j.Steps,
		j.CostCents, j.Seconds, j.PromptTokens, j.CompletionTokens, j.Retries, j.HistoryBytes,
		j.NextSeq, j.RecoverySeq, dbtext.Clean(j.Reason), sqldb.Micros(j.UpdatedAt), j.ReviewSeq, dbtext.Clean(j.Shown), w.Unsettled,
		w.leavesSent(), w.answered()}
	switch {
	case !w.LeaseUntil.IsZero():
		q += `, lease_holder = ?, lease_until = ?`
		args = append(args, w.Holder, sqldb.Micros(w.LeaseUntil))
	case w.Release:
		q += `, lease_holder = '', lease_until = 0`
	}
	q += ` WHERE task_id = ?`
	args = append(args, j.TaskID)
	switch {
	case !w.LeaseUntil.IsZero():
		q += ` AND (status <> ? OR lease_until < ? OR lease_holder = ?) AND (settled = 1 OR lease_until < ? OR lease_holder = ?)`
		args = append(args, string(Draft), sqldb.Micros(w.Now), w.Holder, sqldb.Micros(w.Now), w.Holder)
	case w.Holder != "":
		q += ` AND lease_holder = ?`
		args = append(args, w.Holder)
	}
	if w.Expect != "" {
		q += ` AND status = ?`
		args = append(args, string(w.Expect))
	}
	if n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(q), args...)); err != nil {
		return err
	} else if n != 1 {
		// Rolls the interactions back too.
		return fmt.Errorf("agent: save job %s: %w", j.TaskID, ErrLeaseLost)
	}
	if giveUp {
		var err error
		if *dropped, err = s.giveUpSent(ctx, tx, j.TaskID, sent); err != nil {
			return err
		}
	}
	if w.Consumed == "" && w.Input == "" {
		return nil
	}
	// The row is locked by the update above.
	cur, end, err := s.pendingForWrite(ctx, tx, j.TaskID)
	if err != nil {
		return err
	}
	in := cur
	if w.Consumed != "" {
		in = consume(in, end, w.ConsumedEnd)
	}
	added := int64(0)
	if w.Input != "" {
		in, added = s.appendBounded(in, dbtext.Clean(w.Input))
	}
	if in == cur && added == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_jobs SET pending_input = ?, input_end = input_end + ? WHERE task_id = ?`),
		in, added, j.TaskID)
	return err
}

// pendingForWrite reads job taskID's pending input and its input_end in
// tx, once the job's row is locked.
func (s *Store) pendingForWrite(ctx context.Context, tx *sql.Tx, taskID string) (string, int64, error) {
	var (
		in  string
		end int64
	)
	err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT pending_input, input_end FROM agent_jobs WHERE task_id = ?`), taskID).Scan(&in, &end)
	return in, end, err
}

// inputNote begins a job's pending input whose oldest part the bound
// dropped (see appendBounded), followed by separator and inputCut.
const inputNote = "[Earlier messages were left out here: the input told at one step is at most agent.max_pending_input_bytes, and the newest is kept. They are in the task's history.]"

// inputCut marks where the text kept after inputNote was cut.
const inputCut = "…"

// appendBounded returns cur (a job's pending input) with text (clean
// already) added after separator, and the bytes that adds to the input
// the job was ever given (its input_end, which counts separator before
// every text). Past the store's bound (SetMaxPendingInput) the oldest is
// dropped: what is kept is inputNote, separator, inputCut and the newest
// bytes, so the latest instruction wins, as the prompt's own cut keeps
// the newest messages.
func (s *Store) appendBounded(cur, text string) (string, int64) {
	limit := int(s.maxInput.Load())
	if limit <= 0 {
		limit = DefaultMaxPendingInput
	}
	added := int64(len(separator) + len(text))
	in := text
	if cur != "" {
		in = cur + separator + text
	}
	if len(in) <= limit {
		return in, added
	}
	head := inputNote + separator + inputCut
	keep := max(0, limit-len(head))
	from := len(in) - keep
	for from < len(in) && !utf8.RuneStart(in[from]) {
		from++
	}
	return head + in[from:], added
}

// consume returns in, a job's pending input whose input ends at end,
// without what a step was told of it, which ended at told (StepInput):
// only the input added since stays. When the bound dropped input added
// after told and not yet told (in begins with inputNote and its text
// starts after told), in stays whole, note and all.
func consume(in string, end, told int64) string {
	text := strings.TrimPrefix(in, inputNote+separator+inputCut)
	// text is the input's bytes from end-len(text) to end, each text
	// after its separator.
	start := end - int64(len(text))
	from := told + int64(len(separator)) - start
	switch {
	case from >= int64(len(text)):
		return ""
	case from > 0:
		return text[from:]
	case from < 0:
		return in // nothing of it told; with a note, input was dropped since
	}
	return text
}

// ReplaceInteraction writes it over the stored interaction of its
// sequence (an outcome learned later: an operator's decision), and counts
// the difference in the job's history bytes.
func (s *Store) ReplaceInteraction(ctx context.Context, taskID string, it *Interaction) error {
	body, err := encodeInteraction(it)
	if err != nil {
		return err
	}
	err = s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var old int64
		if err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT `+s.byteLength("body")+` FROM agent_interactions WHERE task_id = ? AND seq = ?`),
			taskID, it.Sequence).Scan(&old); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_interactions SET body = ? WHERE task_id = ? AND seq = ?`),
			string(body), taskID, it.Sequence); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.d.Rebind(`UPDATE agent_jobs SET history_bytes = history_bytes + ? WHERE task_id = ?`),
			int64(len(body))-old, taskID)
		return err
	})
	if err != nil {
		return fmt.Errorf("agent: replace interaction %d of %s: %w", it.Sequence, taskID, err)
	}
	return nil
}

// AddInput adds text to what the job's next model call is told (a
// follow-up message, an operator's decision). A job waiting for a human
// goes back in the queue, PENDING and free to claim; with onlyWaiting,
// only such a job takes the input. It reports whether the job took it
// (false for an ended job, and with onlyWaiting for one not waiting).
func (s *Store) AddInput(ctx context.Context, taskID, text string, onlyWaiting bool, now time.Time) (bool, error) {
	return s.addInput(ctx, taskID, text, onlyWaiting, now, nil)
}

// AddMessages is AddInput of text, the messages of the job's task from
// its message from on (Job.Told) up to upTo: it counts them given
// (told = upTo) in the same write, and only if the job was told from
// messages still. It reports whether the job took them (false for an
// ended job, or one told others meanwhile). An empty text (messages
// that are not the agent's) only counts them.
func (s *Store) AddMessages(ctx context.Context, taskID string, from, upTo int, text string, now time.Time) (bool, error) {
	if text == "" {
		return s.exec(ctx, "count the messages of", taskID, `UPDATE agent_jobs SET told = ?
			WHERE task_id = ? AND told = ? AND status NOT IN (?, ?, ?, ?)`,
			upTo, taskID, from, string(Success), string(Canceled), string(HaltedCost), string(HaltedTime))
	}
	return s.addInput(ctx, taskID, text, false, now, &[2]int{from, upTo})
}

func (s *Store) addInput(ctx context.Context, taskID, text string, onlyWaiting bool, now time.Time, told *[2]int) (bool, error) {
	q := `
			lease_holder = CASE WHEN status = ? THEN '' ELSE lease_holder END,
			lease_until = CASE WHEN status = ? THEN 0 ELSE lease_until END,
			status = CASE WHEN status = ? THEN ? ELSE status END,
			updated_at = ?`
	wait := string(InterventionRequired)
	text = dbtext.Clean(text)
	if told != nil {
		q += `, told = ?`
	}
	q += ` WHERE task_id = ? AND status NOT IN (?, ?, ?, ?)`
	if onlyWaiting {
		q += ` AND status = ?`
	}
	if told != nil {
		q += ` AND told = ?`
	}
	// The statement and its arguments, with the job's pending input as
	// it is with text added (appendBounded).
	statement := func(in string, added int64) (string, []any) {
		var args []any
		set := `UPDATE agent_jobs SET `
		if added > 0 {
			set += `pending_input = ?, input_end = input_end + ?,`
			args = append(args, in, added)
		}
		args = append(args, wait, wait, wait, string(Pending), sqldb.Micros(now))
		if told != nil {
			args = append(args, told[1])
		}
		args = append(args, taskID, string(Success), string(Canceled), string(HaltedCost), string(HaltedTime))
		if onlyWaiting {
			args = append(args, wait)
		}
		if told != nil {
			args = append(args, told[0])
		}
		return set + q, args
	}
	var (
		ok        bool
		was       Status
		requester string
	)
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// A job waiting for a human goes back in the queue: its queue's
		// count needs to know.
		var err error
		if was, requester, err = s.statusForWrite(ctx, tx, taskID); errors.Is(err, sql.ErrNoRows) {
			ok = false
			return nil
		} else if err != nil {
			return err
		}
		var (
			in    string
			added int64
		)
		if text != "" {
			cur, _, err := s.pendingForWrite(ctx, tx, taskID)
			if err != nil {
				return err
			}
			in, added = s.appendBounded(cur, text)
		}
		q, args := statement(in, added)
		n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(q), args...))
		ok = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("agent: add input to job %s: %w", taskID, err)
	}
	if ok && was == InterventionRequired {
		s.moved(requester, was, Pending)
	}
	return ok, nil
}

// Uncounted returns up to limit jobs that have not ended and whose count
// of their task's messages given is unknown (Job.Told < 0: stored
// before it was counted), whose task id comes after after, in task id
// order: a caller pages through them, limit at a time.
func (s *Store) Uncounted(ctx context.Context, after string, limit int) ([]string, error) {
	out, err := sqldb.Column[string](s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT task_id FROM agent_jobs
		WHERE told < 0 AND status NOT IN (?, ?, ?, ?) AND task_id > ? ORDER BY task_id LIMIT ?`),
		string(Success), string(Canceled), string(HaltedCost), string(HaltedTime), after, limit))
	if err != nil {
		return nil, fmt.Errorf("agent: jobs of uncounted messages: %w", err)
	}
	return out, nil
}

// CountTold sets the count of its task's messages the job of taskID was
// given (Job.Told) to n, if it was unknown (Told < 0), and reports
// whether it did.
func (s *Store) CountTold(ctx context.Context, taskID string, n int) (bool, error) {
	return s.exec(ctx, "count the messages of", taskID, `UPDATE agent_jobs SET told = ? WHERE task_id = ? AND told < 0`, n, taskID)
}

// Interactions returns a job's history, in order: the archived
// interactions (verified, see Archive) and the stored ones, each with the
// exact messages its model call sent, rebuilt and checked against their
// hash (ErrHistoryMismatch otherwise).
func (s *Store) Interactions(ctx context.Context, taskID string) ([]Interaction, error) {
	var out []Interaction
	var d historyDecoder
	each := func(b []byte) error {
		it, err := d.decode(b)
		if err != nil {
			return err
		}
		out = append(out, it)
		return nil
	}
	if err := s.liveAfterArchive(ctx, taskID, each); err != nil {
		return nil, err
	}
	return out, nil
}

// EachInteraction calls each with every interaction of a job's history,
// in order, as Interactions returns them, but one at a time: it holds
// the messages of the interaction it reads and of the one before it, not
// the whole history. An interaction is valid only during its call. It
// stops at the first error each returns.
func (s *Store) EachInteraction(ctx context.Context, taskID string, each func(*Interaction) error) error {
	d := historyDecoder{lastOnly: true}
	return s.liveAfterArchive(ctx, taskID, func(b []byte) error {
		it, err := d.decode(b)
		if err != nil {
			return err
		}
		return each(&it)
	})
}

// ReplayJob replays a job's history (Replay) through r as StreamHistory
// reads it, in bounded memory (r tells how many interactions it
// replayed). A history missing its newest interactions fails as History
// does.
func (s *Store) ReplayJob(ctx context.Context, taskID string, r *Replayer) error {
	var h *History
	if err := s.StreamHistory(ctx, taskID, func(head *History) error {
		h = head
		return nil
	}, r.Add); err != nil {
		return err
	}
	return r.End(h)
}

// RawInteractions returns each stored interaction's JSON exactly as
// stored, in order (for replay checks and exports): a request's messages
// as what they add to an earlier interaction's (see encodeInteraction).
func (s *Store) RawInteractions(ctx context.Context, taskID string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	each := func(b []byte) error {
		out = append(out, append(json.RawMessage(nil), b...))
		return nil
	}
	if err := s.liveAfterArchive(ctx, taskID, each); err != nil {
		return nil, err
	}
	return out, nil
}

// liveAfterArchive calls each with the JSON of every archived interaction
// (see archived) and then every live one, in order. The live history must
// start where the archive ends: an archive whose newest segments were
// deleted still chains, and only that gap shows it (ErrArchiveTampered).
// A gap the job's rotation opened as the history was read (its oldest
// live interactions archived between the readings) is read from the
// archive's new segments.
func (s *Store) liveAfterArchive(ctx context.Context, taskID string, each func([]byte) error) error {
	end, err := s.archived(ctx, taskID, archiveEnd{}, each)
	if err != nil {
		return err
	}
	first := true
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT seq, body FROM agent_interactions WHERE task_id = ? ORDER BY seq`), taskID)) {
		var (
			seq int64
			b   []byte
		)
		if err == nil {
			err = rows.Scan(&seq, &b)
		}
		if err == nil && first && seq > end.next {
			// Archived since the archive was read? Its next segments
			// then hold what the live history no longer does.
			end, err = s.archived(ctx, taskID, end, each)
		}
		if err == nil && first && seq != end.next {
			err = fmt.Errorf("%w: job %s: the live history starts at interaction %d, the archive ends before %d", ErrArchiveTampered, taskID, seq, end.next)
		}
		first = false
		if err == nil {
			err = each(b)
		}
		if err != nil {
			return fmt.Errorf("agent: read history of %s: %w", taskID, err)
		}
	}
	return nil
}

// RecoveryPoints returns a job's recovery points, in order.
func (s *Store) RecoveryPoints(ctx context.Context, taskID string) ([]RecoveryPoint, error) {
	return decodedBodies(ctx, s, `SELECT body FROM agent_recovery_points WHERE task_id = ? ORDER BY seq`, taskID, []RecoveryPoint{})
}

// decodedBodies appends to out each JSON body q selects for taskID,
// decoded as a T, in order.
func decodedBodies[T any](ctx context.Context, s *Store, q, taskID string, out []T) ([]T, error) {
	err := s.bodies(ctx, q, taskID, func(b []byte) error {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

func (s *Store) bodies(ctx context.Context, q, taskID string, each func([]byte) error) error {
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(q), taskID)) {
		var b []byte
		if err == nil {
			err = rows.Scan(&b)
		}
		if err == nil {
			err = each(b)
		}
		if err != nil {
			return fmt.Errorf("agent: read history of %s: %w", taskID, err)
		}
	}
	return nil
}

// History returns a job's history in the jobHistory shape.
func (s *Store) History(ctx context.Context, taskID string) (*History, error) {
	h, next, err := s.HistoryHead(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if h.Interactions, err = s.Interactions(ctx, taskID); err != nil {
		return nil, s.forgottenSince(ctx, taskID, err)
	}
	got := 0
	if n := len(h.Interactions); n > 0 {
		got = h.Interactions[n-1].Sequence + 1
	}
	if err := missingNewest(taskID, got, next); err != nil {
		return nil, s.forgottenSince(ctx, taskID, err)
	}
	if end, err := s.historyEnd(ctx, taskID, next, got); err != nil {
		return nil, err
	} else {
		for n := len(h.Interactions); n > 0 && h.Interactions[n-1].Sequence >= end; n-- {
			h.Interactions = h.Interactions[:n-1]
		}
	}
	if h.Interactions == nil {
		h.Interactions = []Interaction{}
	}
	return h, nil
}

// missingNewest is ErrHistoryMismatch when got, the sequence after the
// last interaction of a job's history as read, is before next,
// the job's next: its newest interactions are gone, which nothing after
// them shows; nil otherwise.
func missingNewest(taskID string, got, next int) error {
	if got < next {
		return fmt.Errorf("agent: history of job %s: interaction %d: missing: the job recorded interactions up to %d: %w",
			taskID, got, next-1, ErrHistoryMismatch)
	}
	return nil
}

// forgottenSince is err, the failure of a reading of the history of
// taskID, unless the job was forgotten as it was read (Forget deleting
// its history from under the reading, which then does not verify): then
// ErrForgotten, or ErrNoJob once Forget is done.
func (s *Store) forgottenSince(ctx context.Context, taskID string, err error) error {
	if !errors.Is(err, ErrArchiveTampered) && !errors.Is(err, ErrHistoryMismatch) {
		return err
	}
	if _, gerr := s.Get(ctx, taskID); errors.Is(gerr, ErrNoJob) {
		return gerr
	}
	return err
}

// CheckHistory reads a job's history through (EachInteraction), as
// History would, without holding it: ErrHistoryMismatch or
// ErrArchiveTampered when it does not verify. It returns the history
// without its interactions (HistoryHead).
func (s *Store) CheckHistory(ctx context.Context, taskID string) (*History, error) {
	h, next, err := s.HistoryHead(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if _, err = s.eachBefore(ctx, taskID, -1, next, nil); err != nil {
		return h, s.forgottenSince(ctx, taskID, err)
	}
	return h, nil
}

// StreamHistory reads a job's history as History returns it, without
// holding it: it checks it first (as CheckHistory), so that a history
// that does not verify fails before head or each is called; then it
// calls head with the history without its interactions, and each with
// every interaction, in order (as EachInteraction). The history of a
// job that goes on as it is read is the history the job had when its
// status was read: the interactions it stored since are left out.
func (s *Store) StreamHistory(ctx context.Context, taskID string, head func(*History) error, each func(*Interaction) error) error {
	h, next, err := s.HistoryHead(ctx, taskID)
	if err != nil {
		return err
	}
	got, err := s.eachBefore(ctx, taskID, -1, next, nil)
	if err != nil {
		return s.forgottenSince(ctx, taskID, err)
	}
	end, err := s.historyEnd(ctx, taskID, next, got)
	if err != nil {
		return err
	}
	if err := head(h); err != nil {
		return err
	}
	if _, err = s.eachBefore(ctx, taskID, end, end, each); err != nil {
		return s.forgottenSince(ctx, taskID, err)
	}
	return nil
}

// historyEnd is the sequence after the last interaction of a job's
// history to read, given next, the job's next sequence read with its
// status, and got, the sequence after the last interaction read since
// (at least next): next when the job stored more interactions
// meanwhile, which its status does not count; got when its next
// sequence is unchanged, and behind the history.
func (s *Store) historyEnd(ctx context.Context, taskID string, next, got int) (int, error) {
	if got <= next {
		return next, nil
	}
	j, err := s.Get(ctx, taskID)
	if err != nil {
		return 0, err
	}
	if j.NextSeq != next {
		return next, nil
	}
	return got, nil
}

// errEnough stops eachBefore's reading at the interactions it was asked
// for.
var errEnough = errors.New("agent: the interactions asked for are read")

// eachBefore calls each (when not nil) with every interaction of a job's
// history before end (all of them when end < 0), in order, as
// EachInteraction reads them, and returns the sequence after the last
// one. A history that ends before next, the job's next sequence, fails
// (missingNewest).
func (s *Store) eachBefore(ctx context.Context, taskID string, end, next int, each func(*Interaction) error) (int, error) {
	got := 0
	err := s.EachInteraction(ctx, taskID, func(it *Interaction) error {
		if end >= 0 && it.Sequence >= end {
			return errEnough
		}
		got = it.Sequence + 1
		if each == nil {
			return nil
		}
		return each(it)
	})
	if err != nil && !errors.Is(err, errEnough) {
		return got, err
	}
	return got, missingNewest(taskID, got, next)
}

// HistoryHead returns a job's history without its interactions (nil;
// EachInteraction reads them), and the sequence its next interaction
// will have: the count of the interactions the job recorded.
func (s *Store) HistoryHead(ctx context.Context, taskID string) (*History, int, error) {
	j, err := s.Get(ctx, taskID)
	if err != nil {
		return nil, 0, err
	}
	rps, err := s.RecoveryPoints(ctx, taskID)
	if err != nil {
		return nil, 0, err
	}
	var dropped, givenUp int64
	if err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT cancels_dropped, cancels_given_up FROM agent_jobs WHERE task_id = ?`), taskID).Scan(&dropped, &givenUp); err != nil {
		return nil, 0, fmt.Errorf("agent: history of job %s: %w", taskID, err)
	}
	return &History{JobID: j.TaskID, CreatedAt: j.CreatedAt, Description: j.Description, Status: j.Status,
		RecoveryPoints: rps, CancelsDropped: dropped, CancelsGivenUp: givenUp}, j.NextSeq, nil
}

// List returns the jobs in any of the statuses (all when none), oldest
// first, at most limit (0: no limit).
func (s *Store) List(ctx context.Context, limit int, statuses ...Status) ([]*Job, error) {
	var (
		where string
		args  []any
	)
	where = `WHERE forgotten = 0 `
	for i, st := range statuses {
		if i == 0 {
			where += `AND status IN (?`
		} else {
			where += `, ?`
		}
		args = append(args, string(st))
	}
	if len(statuses) > 0 {
		where += `) `
	}
	where += `ORDER BY created_at, task_id`
	if limit > 0 {
		where += ` LIMIT ?`
		args = append(args, limit)
	}
	return s.jobs(ctx, where, args...)
}
