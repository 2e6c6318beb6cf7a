package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks"
)

// roundTrips counts the requests a pgx connection sends to the server:
// every query, statement, BEGIN and COMMIT, and every prepare.
type roundTrips struct {
	mu   sync.Mutex
	sent []string
}

func (rt *roundTrips) add(sql string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.sent = append(rt.sent, strings.Join(strings.Fields(sql), " "))
}

func (rt *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	rt.add(d.SQL)
	return ctx
}

func (rt *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (rt *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	rt.add("PREPARE " + d.SQL)
	return ctx
}

func (rt *roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// take returns what was sent since the last take.
func (rt *roundTrips) take() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	sent := rt.sent
	rt.sent = nil
	return sent
}

// openCounted opens a Store on the PostgreSQL test database through one
// connection whose round trips rt counts.
func openCounted(t *testing.T, rt *roundTrips) *Store {
	t.Helper()
	cfg, err := pgx.ParseConfig(postgresSchemaDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = rt
	p := sqldb.OpenPostgres(cfg)
	p.SetMaxOpenConns(1) // every statement is prepared on it once, in New
	p.SetMaxIdleConns(1)
	db := &sqldb.DB{Dialect: sqldb.Postgres, W: p, R: p}
	t.Cleanup(func() { db.Close() })
	s, err := New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rt.take()
	return s
}

// The writes of a durable message/send cost PostgreSQL one round trip
// each: the replay record (a fresh one; a held one is read back with a
// second) and the task with its event and the request's kept result.
func TestPostgresRoundTrips(t *testing.T) {
	ctx := context.Background()
	var rt roundTrips
	s := openCounted(t, &rt)
	rs := s.ReplayStoreNoSync()
	const from = "bc1pfrom"
	for _, c := range []struct {
		name string
		call func() error
		want int
	}{
		{"Remember, fresh", func() error {
			_, fresh, err := rs.Remember(ctx, from, "m1", record(t0, time.Minute, 1))
			if err == nil && !fresh {
				t.Error("m1 not fresh")
			}
			return err
		}, 1},
		{"Remember, held", func() error {
			prior, fresh, err := rs.Remember(ctx, from, "m1", record(t0.Add(time.Second), time.Minute, 2))
			if err == nil && (fresh || prior.Fingerprint[0] != 1) {
				t.Errorf("m1 again: fresh %v, prior %+v; want the first record", fresh, prior)
			}
			return err
		}, 2},
		{"Remember, waiting for the disk", func() error {
			_, fresh, err := s.ReplayStore().Remember(ctx, from, "m2", record(t0, time.Minute, 1))
			if err == nil && !fresh {
				t.Error("m2 not fresh")
			}
			return err
		}, 1},
		{"CreateKeeping", func() error {
			kept := tasks.KeptResult{From: from, RequestID: "m1", Result: []byte(`{"task":{"id":"t1"}}`), Expires: t0.Add(time.Hour)}
			_, err := s.CreateKeeping(ctx, task("t1", from), kept)
			return err
		}, 1},
		{"Create", func() error {
			_, err := s.Create(ctx, task("t2", from))
			return err
		}, 1},
	} {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if sent := rt.take(); len(sent) != c.want {
			t.Errorf("%s: %d round trips, want %d:\n%s", c.name, len(sent), c.want, strings.Join(sent, "\n"))
		}
	}
	if got, ok, err := rs.LoadResult(ctx, from, "m1", t0); err != nil || !ok || string(got) != `{"task":{"id":"t1"}}` {
		t.Fatalf("LoadResult = %s %v %v; want the result kept with t1", got, ok, err)
	}
}

// The record of ReplayStoreNoSync does not wait for the disk, and nothing
// else does: on SQLite its commit is one of the writer's unsynced ones,
// ReplayStore's and the task's are not; on PostgreSQL its statement turns
// synchronous_commit off for its own transaction only, and the connection
// keeps the server's setting for ReplayStore's, the task's write and every
// later one.
func TestRememberNoSync(t *testing.T) {
	ctx := context.Background()
	const from = "bc1pfrom"
	t.Run("sqlite", func(t *testing.T) {
		s := open(t, sqliteDSN(t), Options{})
		db := s.DB()
		remember := func(rs *ReplayStore, id string, fp byte) func() error {
			return func() error { _, _, err := rs.Remember(ctx, from, id, record(t0, time.Minute, fp)); return err }
		}
		for _, c := range []struct {
			name     string
			call     func() error
			unsynced int64
		}{
			{"Remember", remember(s.ReplayStoreNoSync(), "m1", 1), 1},
			{"Remember, held", remember(s.ReplayStoreNoSync(), "m1", 2), 1},
			{"Remember, waiting for the disk", remember(s.ReplayStore(), "m2", 1), 0},
			{"CreateKeeping", func() error {
				_, err := s.CreateKeeping(ctx, task("t1", from), tasks.KeptResult{From: from, RequestID: "m1", Result: []byte("{}"), Expires: t0.Add(time.Hour)})
				return err
			}, 0},
		} {
			before, _ := db.GroupCommits()
			u := db.UnsyncedCommits()
			if err := c.call(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			after, _ := db.GroupCommits()
			if after-before != 1 || db.UnsyncedCommits()-u != c.unsynced {
				t.Errorf("%s: %d commits, %d unsynced; want 1, %d", c.name, after-before, db.UnsyncedCommits()-u, c.unsynced)
			}
		}
	})
	t.Run("postgres", func(t *testing.T) {
		var rt roundTrips
		s := openCounted(t, &rt)
		setting := func(q interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		}) string {
			t.Helper()
			var v string
			if err := q.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		server := setting(s.w)
		if server == "off" {
			t.Skip("the test server's synchronous_commit is off: nothing to tell apart")
		}
		// Inside a transaction, to read the setting the statement leaves
		// for its commit.
		inTx := func(stmt *sql.Stmt, args ...any) string {
			t.Helper()
			tx, err := s.w.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
			return setting(tx)
		}
		if got := inTx(s.st.rememberNoSync, from, "m0", int64(1), int64(2), make([]byte, 32), ""); got != "off" {
			t.Errorf("Remember's transaction commits with synchronous_commit %s; want off", got)
		}
		if got := inTx(s.st.remember, from, "m0", int64(1), int64(2), make([]byte, 32), ""); got != server {
			t.Errorf("ReplayStore's Remember commits with synchronous_commit %s; want the server's %s", got, server)
		}
		if got := inTx(s.st.createTask, "t0", from, "", "submitted", int64(1), "", "", int64(1), int64(1), "[]", "[]", "{}",
			int64(1), "status", "{}", nil, int64(0), int64(0), nil, nil); got != server {
			t.Errorf("the task's transaction commits with synchronous_commit %s; want the server's %s", got, server)
		}
		if _, fresh, err := s.ReplayStoreNoSync().Remember(ctx, from, "m1", record(t0, time.Minute, 1)); err != nil || !fresh {
			t.Fatalf("Remember: fresh %v, %v", fresh, err)
		}
		if got := setting(s.w); got != server {
			t.Errorf("after Remember the connection's synchronous_commit is %s; want the server's %s", got, server)
		}
	})
}
