package agent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// A job's history that grows past Config.MaxHistoryBytes is rotated: its
// oldest interactions move from the live table into an archive segment,
// their JSON one a line, gzipped, and for a sensitive job sealed with
// AES-256-GCM (the prompts they hold stay unreadable without the
// operator's key). Each segment names the hash of the one before it and
// its own: SHA-256 over the previous hash, the job, the segment's index and
// sequences, and its stored body. Reading the history (Interactions, and so
// `job history` and `job replay`) verifies the chain and yields the
// archived interactions before the live ones, so that the history reads
// exactly as if it had never been rotated; a segment edited, removed or
// reordered fails with ErrArchiveTampered.

// Errors of the archives.
var (
	// ErrArchiveTampered: a segment does not verify against the chain.
	ErrArchiveTampered = errors.New("agent: the history archive does not verify")
	// ErrArchiveSealed: a segment is sealed and no key, or another key,
	// was given.
	ErrArchiveSealed = errors.New("agent: the history archive is sealed")
)

// HistoryKeySize is the size of the key that seals sensitive jobs'
// archives.
const HistoryKeySize = 32

// maxSegmentBytes bounds a segment's decompressed body as it is read back:
// a body that inflates past it is refused rather than filling memory.
const maxSegmentBytes = 1 << 30

// Sealer seals and opens archive segments with AES-256-GCM.
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a Sealer with key, HistoryKeySize bytes.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != HistoryKeySize {
		return nil, fmt.Errorf("agent: history key: want %d bytes; got %d", HistoryKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("agent: history key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("agent: history key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// UseKey gives the store the key that opens sealed archive segments (and
// seals new ones, for sensitive jobs). Call it before the store is used.
func (s *Store) UseKey(k *Sealer) { s.sealer = k }

// segmentHead is what a segment's hash covers beside its body.
type segmentHead struct {
	taskID      string
	idx         int64
	first, last int64
	sealed      bool
	prevHash    string
}

func (h segmentHead) hash(body []byte) string {
	d := sha256.New()
	io.WriteString(d, h.prevHash)
	d.Write([]byte{0})
	io.WriteString(d, h.taskID)
	d.Write([]byte{0})
	var n [33]byte
	binary.BigEndian.PutUint64(n[0:], uint64(h.idx))
	binary.BigEndian.PutUint64(n[8:], uint64(h.first))
	binary.BigEndian.PutUint64(n[16:], uint64(h.last))
	if h.sealed {
		n[32] = 1
	}
	d.Write(n[:])
	d.Write(body)
	return hex.EncodeToString(d.Sum(nil))
}

// aad binds a sealed body to its place in the chain.
func (h segmentHead) aad() []byte {
	return fmt.Appendf(nil, "snapnode-history\x00%s\x00%d\x00%d\x00%d", h.taskID, h.idx, h.first, h.last)
}

// Archive moves the job's stored interactions with a sequence below
// before into a new archive segment, sealed when seal is set (the store
// then needs the key to read it: UseKey), in one transaction that also
// takes their bytes off the job's history bytes; with holder set, only
// while holder holds the job (else ErrLeaseLost). It returns the bytes
// taken off (0 when there was nothing to archive).
func (s *Store) Archive(ctx context.Context, taskID, holder string, before int, seal bool) (int64, error) {
	if seal && s.sealer == nil {
		return 0, fmt.Errorf("%w: a sensitive job's archive needs the history key", ErrArchiveSealed)
	}
	var removed int64
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		removed = 0
		rows, err := tx.QueryContext(ctx, s.d.Rebind(`SELECT seq, body FROM agent_interactions WHERE task_id = ? AND seq < ? ORDER BY seq`), taskID, before)
		if err != nil {
			return err
		}
		var (
			plain       bytes.Buffer
			first, last int64 = -1, -1
		)
		zw := gzip.NewWriter(&plain)
		for rows.Next() {
			var (
				seq  int64
				body []byte
			)
			if err := rows.Scan(&seq, &body); err != nil {
				rows.Close()
				return err
			}
			if first < 0 {
				first = seq
			}
			last = seq
			removed += int64(len(body))
			zw.Write(body)
			zw.Write([]byte{'\n'})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if first < 0 {
			return nil
		}
		if err := zw.Close(); err != nil {
			return err
		}
		h := segmentHead{taskID: taskID, first: first, last: last, sealed: seal}
		err = tx.QueryRowContext(ctx, s.d.Rebind(`SELECT idx, hash FROM agent_history_segments WHERE task_id = ? ORDER BY idx DESC LIMIT 1`), taskID).
			Scan(&h.idx, &h.prevHash)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			h.idx = 0
		case err != nil:
			return err
		default:
			h.idx++
		}
		body := plain.Bytes()
		if seal {
			nonce := make([]byte, s.sealer.aead.NonceSize())
			if _, err := rand.Read(nonce); err != nil {
				return err
			}
			body = s.sealer.aead.Seal(nonce, nonce, body, h.aad())
		}
		if _, err := tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO agent_history_segments (task_id, idx, first_seq, last_seq, sealed, prev_hash, hash, body)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), taskID, h.idx, first, last, boolInt(seal), h.prevHash, h.hash(body), body); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.d.Rebind(`DELETE FROM agent_interactions WHERE task_id = ? AND seq <= ?`), taskID, last); err != nil {
			return err
		}
		q, args := `UPDATE agent_jobs SET history_bytes = history_bytes - ? WHERE task_id = ?`, []any{removed, taskID}
		if holder != "" {
			q += ` AND lease_holder = ?`
			args = append(args, holder)
		}
		if n, err := sqldb.Affected(tx.ExecContext(ctx, s.d.Rebind(q), args...)); err != nil {
			return err
		} else if n != 1 {
			return ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("agent: archive the history of %s: %w", taskID, err)
	}
	return removed, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// archiveEnd is where a reading of a job's archive ended: the index of
// the next segment, the hash of the last one, and the sequence of the
// interaction after it (all zero without an archive).
type archiveEnd struct {
	idx  int64
	hash string
	next int64
}

// archived calls each with every archived interaction's JSON, in order,
// after verifying each segment against the chain, from the segment at
// (the zero archiveEnd: the first), and returns where the archive ends:
// the live history must start at its next.
func (s *Store) archived(ctx context.Context, taskID string, at archiveEnd, each func([]byte) error) (archiveEnd, error) {
	rows, err := s.db.R.QueryContext(ctx, s.d.Rebind(`SELECT idx, first_seq, last_seq, sealed, prev_hash, hash, body
		FROM agent_history_segments WHERE task_id = ? AND idx >= ? ORDER BY idx`), taskID, at.idx)
	if err != nil {
		return at, fmt.Errorf("agent: read the history archive of %s: %w", taskID, err)
	}
	defer rows.Close()
	for ; rows.Next(); at.idx++ {
		var (
			h      = segmentHead{taskID: taskID}
			sealed int64
			hash   string
			body   []byte
		)
		if err := rows.Scan(&h.idx, &h.first, &h.last, &sealed, &h.prevHash, &hash, &body); err != nil {
			return at, fmt.Errorf("agent: read the history archive of %s: %w", taskID, err)
		}
		h.sealed = sealed != 0
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: job %s, segment %d: %s", ErrArchiveTampered, taskID, h.idx, fmt.Sprintf(format, args...))
		}
		switch {
		case h.idx != at.idx:
			return at, bad("segment %d is missing", at.idx)
		case h.prevHash != at.hash:
			return at, bad("it does not follow the segment before it (prev_hash %.12s…, want %.12s…)", h.prevHash, at.hash)
		case h.first != at.next || h.last < h.first:
			return at, bad("it holds interactions %d to %d where %d was next", h.first, h.last, at.next)
		}
		plain, err := s.openSegment(h, hash, body)
		if err != nil {
			return at, err
		}
		count, err := eachLine(plain, each)
		if err != nil {
			return at, bad("%v", err)
		}
		if count != h.last-h.first+1 {
			return at, bad("it holds %d interactions, not %d", count, h.last-h.first+1)
		}
		at.hash, at.next = hash, h.last+1
	}
	if err := rows.Err(); err != nil {
		return at, fmt.Errorf("agent: read the history archive of %s: %w", taskID, err)
	}
	return at, nil
}

// openSegment returns the gzipped lines of the segment h whose stored
// body and hash are body and hash, once body matches hash (else
// ErrArchiveTampered), opened with the history key when it is sealed
// (else ErrArchiveSealed).
func (s *Store) openSegment(h segmentHead, hash string, body []byte) ([]byte, error) {
	if h.hash(body) != hash {
		return nil, fmt.Errorf("%w: job %s, segment %d: its content does not match its hash", ErrArchiveTampered, h.taskID, h.idx)
	}
	if !h.sealed {
		return body, nil
	}
	if s.sealer == nil {
		return nil, fmt.Errorf("%w: job %s, segment %d: the history key (agent.history_key_file) is needed to read it", ErrArchiveSealed, h.taskID, h.idx)
	}
	n := s.sealer.aead.NonceSize()
	if len(body) < n {
		return nil, fmt.Errorf("%w: job %s, segment %d: sealed body too short", ErrArchiveTampered, h.taskID, h.idx)
	}
	plain, err := s.sealer.aead.Open(nil, body[:n], body[n:], h.aad())
	if err != nil {
		return nil, fmt.Errorf("%w: job %s, segment %d: it does not open with this key", ErrArchiveSealed, h.taskID, h.idx)
	}
	return plain, nil
}

// eachLine calls each with every line of the gzipped body and returns how
// many there were.
func eachLine(gz []byte, each func([]byte) error) (int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(io.LimitReader(zr, maxSegmentBytes))
	sc.Buffer(make([]byte, 0, 64<<10), maxSegmentBytes)
	var n int64
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return n, err
		}
		n++
	}
	return n, sc.Err()
}

// Segments returns how many archive segments the job's history has.
func (s *Store) Segments(ctx context.Context, taskID string) (int, error) {
	var n int
	err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT COUNT(*) FROM agent_history_segments WHERE task_id = ?`), taskID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("agent: count the history archive of %s: %w", taskID, err)
	}
	return n, nil
}

// rotate archives the job's history but its last interaction (whose
// observation may still be written) once the stored history has reached
// Config.MaxHistoryBytes; a sensitive job's segments are sealed.
func (jr *jobRun) rotate(ctx context.Context) error {
	r, j := jr.r, jr.j
	if j.HistoryBytes < r.cfg.MaxHistoryBytes {
		return nil
	}
	if jr.dirty != nil {
		if err := jr.save(ctx, nil); err != nil {
			return err
		}
	}
	removed, err := r.cfg.Store.Archive(ctx, j.TaskID, r.cfg.Holder, j.NextSeq-1, r.cfg.Sensitive)
	if err != nil {
		return err
	}
	j.HistoryBytes -= removed
	if removed > 0 {
		r.log.Info("agent: job history archived", "task", j.TaskID, "bytes", removed)
	}
	return nil
}
