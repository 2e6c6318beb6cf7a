package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// Identity returns the address of the node whose database this is, as
// RecordIdentity recorded it at the node's first start, or "" when none
// is recorded yet (a new database, or one made by a build before the
// record).
func (s *Store) Identity(ctx context.Context) (string, error) {
	if err := s.start(ctx, "identity"); err != nil {
		return "", err
	}
	return readIdentity(ctx, s.r)
}

func readIdentity(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (string, error) {
	var addr string
	err := q.QueryRowContext(ctx, "SELECT address FROM node_identity WHERE id = 1").Scan(&addr)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sqlstore: read the node's identity: %w", err)
	}
	return addr, nil
}

// RecordIdentity records address as the node's whose database this is,
// unless an address is recorded already, and returns the address the
// database records then: address, or the one recorded before (another
// replica's, which recorded first when both started at once). The
// record is never changed: the caller compares what it returns with its
// own address.
func (s *Store) RecordIdentity(ctx context.Context, address string) (string, error) {
	if err := s.start(ctx, "record identity"); err != nil {
		return "", err
	}
	if address == "" {
		return "", errors.New("sqlstore: record identity: no address")
	}
	// ON CONFLICT DO NOTHING (SQLite 3.24, PostgreSQL 9.5): of two
	// replicas recording at once, the second keeps the first's record.
	if _, err := s.w.ExecContext(ctx, s.d.Rebind("INSERT INTO node_identity (id, address, recorded_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING"),
		address, time.Now().UnixMicro()); err != nil {
		return "", dbError("record identity", "", err)
	}
	// Read on the writer: the row just written, or the one kept.
	return readIdentity(ctx, s.w)
}

// ReadIdentity is Identity on a database it does not migrate (a backup's
// copy, checked as it is): "" too when the database has no table for the
// record (made by a build before it).
func ReadIdentity(ctx context.Context, db *sqldb.DB) (string, error) {
	ok, err := db.TableExists(ctx, "node_identity")
	if err != nil || !ok {
		return "", err
	}
	return readIdentity(ctx, db.R)
}
