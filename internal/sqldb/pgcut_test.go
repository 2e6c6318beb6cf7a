package sqldb_test

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// A PostgreSQL server that goes away behind an address that takes
// connections but never answers (or drops them unanswered) fails the
// statements waiting for a connection within the connect time-out, instead
// of holding them, and those of the callers that set no deadline of their
// own (a Nostr request, the audit sealer) for ever; and the pool connects
// again by itself once the server is back.
func TestPostgresServerGoneAndBack(t *testing.T) {
	proxied, p := testdb.ProxiedDSN(t, testdb.Postgres(t))
	db, err := sqldb.Open(context.Background(), proxied, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background() // no deadline: as a Nostr request's
	if _, err := db.W.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	p.SetMode(testdb.Cut)
	failed := make(chan error, 1)
	go func() {
		_, err := db.W.ExecContext(ctx, "SELECT 1")
		failed <- err
	}()
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("a statement succeeded with the server gone")
		}
		t.Logf("with the server gone: %v", err)
	case <-time.After(sqldb.DefaultConnectTimeout + 10*time.Second):
		t.Fatal("a statement waits for ever for a server that is gone")
	}

	p.SetMode(testdb.Forward)
	var one int
	if err := db.W.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the server back, the statement failed: %v", err)
	}
}
