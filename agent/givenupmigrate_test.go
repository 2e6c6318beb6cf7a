package agent

import (
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
)

// Migration 0015 gives the jobs a database at 0014 holds a count of
// records given up of none, and the count then follows the records given
// up; opening the store again migrates nothing twice.
func TestMigrationGivesUpCancelsOfNone(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openTestDB(t, dsn)
		testdb.MigrateLikeOlderBuilds(t, db, migrations().FS, "agent_migrations", 14)
		old := &Store{db: db, d: db.Dialect} // the 0014 schema: no cancels_given_up
		mustCreate(t, ctx, old, storeJob("old", Canceled, storeT0))
		s, err := OpenStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if s, err = OpenStore(ctx, db); err != nil {
			t.Fatalf("opened again: %v", err)
		}
		if v, err := db.SchemaVersion(ctx, "agent"); err != nil || v < 15 {
			t.Fatalf("SchemaVersion = %d, %v; want at least 15", v, err)
		}
		h, err := s.History(ctx, "old")
		if err != nil || h.CancelsGivenUp != 0 {
			t.Fatalf("History = %+v, %v; want cancels_given_up 0", h, err)
		}
		if _, err := db.W.ExecContext(ctx, db.Dialect.Rebind(`INSERT INTO agent_sent_cancels (task_id, sent) VALUES (?, ?)`), "old", "work"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.TakeCanceledSent(ctx, "old", []byte("work"), at(0), at(time.Minute)); err != nil || n != 1 {
			t.Fatalf("TakeCanceledSent = %d, %v", n, err)
		}
		for i, want := range []bool{true, false} {
			if ok, err := s.GiveUpCanceledSent(ctx, "old", []byte("work")); err != nil || ok != want {
				t.Fatalf("GiveUpCanceledSent #%d = %v, %v; want %v", i+1, ok, err, want)
			}
		}
		if h, err = s.History(ctx, "old"); err != nil || h.CancelsGivenUp != 1 {
			t.Fatalf("History = %+v, %v; want cancels_given_up 1", h, err)
		}
	})
}
