package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// Recent returns the newest limit interactions of the job on taskID, in
// order, and how many came before them, reading no others: the live
// history's newest rows, then, when those are fewer than limit, the
// archive's segments from the newest, each checked against its hash, up
// to the one that completes them (the chain from the first segment is
// not checked: Interactions and History check it). What it reads of an
// interaction is as stored but its request's messages, which are not
// rebuilt (Request.Messages is nil): they build on earlier interactions.
// It is for a view of a long history (the console's task page), which
// Interactions would read whole.
func (s *Store) Recent(ctx context.Context, taskID string, limit int) ([]Interaction, int, error) {
	if limit <= 0 {
		return nil, 0, nil
	}
	var live, archived int
	if err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT COUNT(*) FROM agent_interactions WHERE task_id = ?`), taskID).Scan(&live); err != nil {
		return nil, 0, fmt.Errorf("agent: count the history of %s: %w", taskID, err)
	}
	if err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT COALESCE(SUM(last_seq - first_seq + 1), 0) FROM agent_history_segments WHERE task_id = ?`), taskID).Scan(&archived); err != nil {
		return nil, 0, fmt.Errorf("agent: count the history archive of %s: %w", taskID, err)
	}
	// Newest first, then put in order.
	var out []Interaction
	for it, err := range s.briefs(ctx, taskID, `SELECT body FROM agent_interactions WHERE task_id = ? ORDER BY seq DESC LIMIT ?`, taskID, limit) {
		if err != nil {
			return nil, 0, err
		}
		out = append(out, it)
	}
	if len(out) < limit && archived > 0 {
		older, err := s.recentArchived(ctx, taskID, limit-len(out))
		if err != nil {
			return nil, 0, err
		}
		out = append(out, older...)
	}
	slices.Reverse(out)
	return out, live + archived - len(out), nil
}

// recentArchived returns the newest n archived interactions of taskID,
// newest first, reading the segments from the newest until it has them.
func (s *Store) recentArchived(ctx context.Context, taskID string, n int) ([]Interaction, error) {
	var out []Interaction
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT idx, first_seq, last_seq, sealed, prev_hash, hash, body
		FROM agent_history_segments WHERE task_id = ? ORDER BY idx DESC`), taskID)) {
		var (
			h      = segmentHead{taskID: taskID}
			sealed int64
			hash   string
			body   []byte
		)
		if err == nil {
			err = rows.Scan(&h.idx, &h.first, &h.last, &sealed, &h.prevHash, &hash, &body)
		}
		if err != nil {
			return nil, fmt.Errorf("agent: read the history archive of %s: %w", taskID, err)
		}
		h.sealed = sealed != 0
		plain, err := s.openSegment(h, hash, body)
		if err != nil {
			return nil, err
		}
		var seg []Interaction
		if _, err := eachLine(plain, func(b []byte) error {
			it, err := decodeBrief(b)
			seg = append(seg, it)
			return err
		}); err != nil {
			return nil, fmt.Errorf("%w: job %s, segment %d: %v", ErrArchiveTampered, taskID, h.idx, err)
		}
		slices.Reverse(seg)
		out = append(out, seg[:min(len(seg), n-len(out))]...)
		if len(out) == n {
			break
		}
	}
	return out, nil
}

// Proposer returns the newest interaction of the job on taskID whose
// observation names actionID (the step that proposed it, as the runtime
// finds it to settle a decision on it), read as Recent reads one; nil
// when none of the live history does. It reads the rows that name
// actionID alone; an archived step is not looked for.
func (s *Store) Proposer(ctx context.Context, taskID, actionID string) (*Interaction, error) {
	// The observation's field as the store writes it (encodeInteraction).
	key, err := json.Marshal(actionID)
	if err != nil {
		return nil, err
	}
	find := "instr(body, ?) > 0"
	if s.d.Name() == "postgres" {
		find = "strpos(body, ?) > 0"
	}
	for it, err := range s.briefs(ctx, taskID, `SELECT body FROM agent_interactions WHERE task_id = ? AND `+find+` ORDER BY seq DESC`,
		taskID, `"action_id":`+string(key)) {
		if err != nil {
			return nil, err
		}
		if it.Observation != nil && it.Observation.ActionID == actionID {
			return &it, nil
		}
	}
	return nil, nil
}

// briefs yields, in the order query gives them, the interactions of the
// live history of taskID whose bodies query (with args) selects, each
// read by decodeBrief; an error, wrapped, ends them.
func (s *Store) briefs(ctx context.Context, taskID, query string, args ...any) iter.Seq2[Interaction, error] {
	return func(yield func(Interaction, error) bool) {
		for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(query), args...)) {
			var b []byte
			if err == nil {
				err = rows.Scan(&b)
			}
			var it Interaction
			if err == nil {
				it, err = decodeBrief(b)
			}
			if err != nil {
				yield(Interaction{}, fmt.Errorf("agent: read history of %s: %w", taskID, err))
				return
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}

// decodeBrief is the Interaction stored as b, its request's messages
// left out (historyDecoder rebuilds them from the interactions before).
func decodeBrief(b []byte) (Interaction, error) {
	var it Interaction
	st := storedInteraction{Interaction: &it}
	if err := json.Unmarshal(b, &st); err != nil {
		return Interaction{}, err
	}
	sr := st.Request
	it.Request = Request{Prompt: sr.Prompt, FilesContext: sr.FilesContext, Metadata: sr.Metadata}
	return it, nil
}
