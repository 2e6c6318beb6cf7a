package sqlstore

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// The record of the node's address: none on a new database, the first
// address recorded kept (a second RecordIdentity returns it, as a
// replica starting with another key finds it), and ReadIdentity, which
// does not migrate, reads it, or none on a database without the table.
func TestIdentityRecord(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if got, err := ReadIdentity(ctx, db); err != nil || got != "" {
			t.Fatalf("ReadIdentity before any migration = %q, %v; want none", got, err)
		}
		s, err := New(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got, err := s.Identity(ctx); err != nil || got != "" {
			t.Fatalf("Identity of a new database = %q, %v; want none", got, err)
		}
		const first, second = "bc1pfirst", "bc1psecond"
		if got, err := s.RecordIdentity(ctx, first); err != nil || got != first {
			t.Fatalf("RecordIdentity(%s) = %q, %v", first, got, err)
		}
		if got, err := s.RecordIdentity(ctx, second); err != nil || got != first {
			t.Fatalf("RecordIdentity(%s) after %s = %q, %v; want %s kept", second, first, got, err, first)
		}
		if got, err := s.Identity(ctx); err != nil || got != first {
			t.Fatalf("Identity = %q, %v; want %s", got, err, first)
		}
		if got, err := ReadIdentity(ctx, db); err != nil || got != first {
			t.Fatalf("ReadIdentity = %q, %v; want %s", got, err, first)
		}
	})
}
