package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/tasks/taskstest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/storetest"
)

func TestConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) tasks.Store { return open(t, sqliteDSN(t), Options{}) })
	})
	t.Run("sqlite-normal", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) tasks.Store { return open(t, sqliteDSN(t), Options{Synchronous: "normal"}) })
	})
	t.Run("postgres", func(t *testing.T) {
		postgresDSN(t) // skip (or fail in CI) once, not per subtest
		storetest.Run(t, func(t *testing.T) tasks.Store { return open(t, postgresSchemaDSN(t), Options{}) })
	})
}

// Both dialects have the same migrations, by number and name.
func TestMigrationFiles(t *testing.T) {
	lite, err := migrations().Names(sqldb.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrations().Names(sqldb.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(lite) == 0 || !slices.Equal(lite, pg) {
		t.Fatalf("migrations differ: sqlite %v, postgres %v", lite, pg)
	}
}

func TestMigrate(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		all, _ := migrations().Names(sqldb.SQLite)
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := s.SchemaVersion(ctx); err != nil || v != len(all) {
			t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, len(all))
		}
		if _, err := s.Create(ctx, task("kept", "alice")); err != nil {
			t.Fatal(err)
		}
		s.Close()

		// Reopening applies nothing twice and keeps the data.
		s, err = Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM snapnode_migrations WHERE component = 'tasks'").Scan(&n); err != nil || n != len(all) {
			t.Fatalf("snapnode_migrations holds %d rows (%v), want %d", n, err, len(all))
		}
		if _, err := s.Get(ctx, "kept"); err != nil {
			t.Fatal(err)
		}
		// A database from a newer build is refused.
		if _, err := s.w.ExecContext(ctx, s.d.Rebind("INSERT INTO snapnode_migrations (component, version, name, applied_at) VALUES ('tasks', ?, 'future', 0)"), len(all)+1); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := Open(ctx, dsn); !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("Open of a newer schema: err = %v, want ErrSchemaTooNew", err)
		}
	})
}

// Processes starting at once on a new database: every Open succeeds and
// each migration is applied once.
func TestConcurrentOpen(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		const n = 6
		stores := make([]*Store, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { stores[i], errs[i] = Open(ctx, dsn) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Errorf("Open %d: %v", i, errs[i])
				continue
			}
			defer stores[i].Close()
		}
		if t.Failed() {
			return
		}
		all, _ := migrations().Names(sqldb.SQLite)
		var rows int
		if err := stores[0].r.QueryRowContext(ctx, "SELECT count(*) FROM snapnode_migrations WHERE component = 'tasks'").Scan(&rows); err != nil || rows != len(all) {
			t.Fatalf("snapnode_migrations holds %d rows (%v), want %d", rows, err, len(all))
		}
	})
}

func task(id, owner string) *tasks.Task {
	return &tasks.Task{
		ID:        id,
		ContextID: "ctx-" + owner,
		Owner:     owner,
		Status:    tasks.Status{State: tasks.StateSubmitted, Timestamp: time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC)},
		History: []tasks.Message{{MessageID: "m0-" + id, Role: tasks.RoleUser, Parts: []tasks.Part{
			tasks.TextPart("hello"),
			tasks.DataPart(json.RawMessage(`{"schema_version":"1.0.0","action":"read_file","args":{"path":"/sandbox/a"}}`)),
		}}},
		IdempotencyKey: "key-" + id,
		CreatedAt:      time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC),
	}
}

// What Create, Update and the appends return is what Get returns: times in
// UTC to the microsecond, JSON as stored. A data part keeps its bytes (key
// order, <, >, &), as a signed proposal should.
func TestResultsMatchGet(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		in := task("p1", "alice")
		at := time.Date(2026, 2, 4, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
		in.Status.Timestamp, in.CreatedAt = at, at
		data := `{"z":1,"a":"<b>&</b>","n":[3,1]}`
		in.History[0].Parts = append(in.History[0].Parts, tasks.DataPart(json.RawMessage(data)))
		in.Metadata = map[string]any{"n": 1, "s": "x"}

		check := func(what string, got *tasks.Task) {
			t.Helper()
			stored, err := s.Get(ctx, "p1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, stored) {
				t.Fatalf("%s result differs from Get:\n%+v\n%+v", what, got, stored)
			}
		}
		created, err := s.Create(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		check("Create", created)
		want := at.UTC().Truncate(time.Microsecond)
		if !created.CreatedAt.Equal(want) || created.CreatedAt.Location() != time.UTC || !created.Status.Timestamp.Equal(want) {
			t.Fatalf("times: created %v, status %v, want %v in UTC", created.CreatedAt, created.Status.Timestamp, want)
		}
		if got := string(created.History[0].Parts[2].Data); got != data {
			t.Fatalf("data part = %s, want the bytes sent: %s", got, data)
		}

		next := created.Clone()
		next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: at.Add(time.Nanosecond)}
		updated, err := s.Update(ctx, next, 1)
		if err != nil {
			t.Fatal(err)
		}
		check("Update", updated)
		appended, err := s.AppendHistory(ctx, "p1", 2, tasks.Message{MessageID: "m2", Role: tasks.RoleAgent, Parts: []tasks.Part{tasks.TextPart("<ok>")}})
		if err != nil {
			t.Fatal(err)
		}
		check("AppendHistory", appended)
		art, err := s.AppendArtifact(ctx, "p1", 3, tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{tasks.DataPart(json.RawMessage(data))}})
		if err != nil {
			t.Fatal(err)
		}
		check("AppendArtifact", art)
		if art.Version != 4 || len(art.History) != 2 || string(art.Artifacts[0].Parts[0].Data) != data {
			t.Fatalf("after appends: v%d, %d messages, artifact %s", art.Version, len(art.History), art.Artifacts[0].Parts[0].Data)
		}
		// Appending nothing is still a change.
		same, err := s.AppendHistory(ctx, "p1", 4)
		if err != nil || same.Version != 5 || len(same.History) != 2 {
			t.Fatalf("empty AppendHistory: %v", err)
		}
	})
}

// Two Stores on one database, as two processes or replicas would be:
// optimistic concurrency holds across them.
func TestTwoStores(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		a, b := open(t, dsn, Options{}), open(t, dsn, Options{})
		if _, err := a.Create(ctx, task("shared", "alice")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctx, task("shared", "bob")); !errors.Is(err, tasks.ErrExists) {
			t.Fatalf("second Create through the other store: %v", err)
		}
		const writers, each = 6, 15
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			s := []*Store{a, b}[w%2]
			wg.Go(func() {
				for i := 0; i < each; {
					cur, err := s.Get(ctx, "shared")
					if err != nil {
						errs <- err
						return
					}
					m := tasks.Message{MessageID: fmt.Sprintf("w%d-%d", w, i), Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("x")}}
					_, err = s.AppendHistory(ctx, "shared", cur.Version, m)
					if errors.Is(err, tasks.ErrVersionConflict) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					i++
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, err := b.Get(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 1+writers*each || len(got.History) != 1+writers*each {
			t.Fatalf("version %d with %d messages, want %d", got.Version, len(got.History), 1+writers*each)
		}
	})
}

func TestFindByIdempotencyKey(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		for _, tk := range []*tasks.Task{task("k1", "alice"), task("k2", "bob")} {
			tk.IdempotencyKey = "same"
			if _, err := s.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.FindByIdempotencyKey(ctx, "bob", "same")
		if err != nil || got.ID != "k2" {
			t.Fatalf("bob's key: %v, %v", got, err)
		}
		for _, c := range [][2]string{{"carol", "same"}, {"alice", "other"}, {"alice", ""}} {
			if _, err := s.FindByIdempotencyKey(ctx, c[0], c[1]); !errors.Is(err, tasks.ErrNotFound) {
				t.Errorf("FindByIdempotencyKey(%q, %q): err = %v, want ErrNotFound", c[0], c[1], err)
			}
		}
	})
}

func TestClosed(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, task("c1", "alice")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := s.Get(ctx, "c1"); !errors.Is(err, ErrClosed) {
			t.Errorf("Get after Close: %v", err)
		}
		if _, err := s.Create(ctx, task("c2", "alice")); !errors.Is(err, ErrClosed) {
			t.Errorf("Create after Close: %v", err)
		}
		if _, _, err := s.ReplayStore().Remember(ctx, "a", "b", snap.ReplayRecord{}); !errors.Is(err, ErrClosed) {
			t.Errorf("Remember after Close: %v", err)
		}
	})
}

// Concurrent writers share commits, and a write that fails in a batch (a
// duplicate id here) leaves the others of the batch committed.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := open(t, sqliteDSN(t), Options{})
	const writers, each, ids = 48, 20, 600
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won = map[string]string{} // id → owner whose Create succeeded
	)
	for w := range writers {
		owner := fmt.Sprintf("owner%d", w)
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("g%d", (w*each+i*7)%ids)
				_, err := s.Create(ctx, task(id, owner))
				switch {
				case err == nil:
					mu.Lock()
					if prev, dup := won[id]; dup {
						t.Errorf("%s created twice (%s, %s)", id, prev, owner)
					}
					won[id] = owner
					mu.Unlock()
				case !errors.Is(err, tasks.ErrExists):
					t.Errorf("Create %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	all, err := s.List(ctx, tasks.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(won) {
		t.Fatalf("%d tasks stored, %d Creates succeeded", len(all), len(won))
	}
	for _, tk := range all {
		if won[tk.ID] != tk.Owner {
			t.Fatalf("task %s belongs to %s, but %s's Create succeeded", tk.ID, tk.Owner, won[tk.ID])
		}
	}
	b, w := s.db.GroupCommits()
	t.Logf("%d writes in %d commits", w, b)
	if w != writers*each || b >= w {
		t.Fatalf("%d writes in %d commits: no group commit", w, b)
	}
}

// A write whose context ends while it waits for the writer is not made.
func TestCanceledWhileQueued(t *testing.T) {
	s := open(t, sqliteDSN(t), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	// Hold the writer with a write that waits for the test.
	release := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_ = s.write(context.Background(), "hold", "", func(context.Context, *sql.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	done := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, task("late", "alice"))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Create: err = %v, want context.Canceled", err)
	}
	close(release)
	if _, err := s.Get(context.Background(), "late"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("canceled Create stored the task: %v", err)
	}
}

type codeErr int

func (e codeErr) Error() string { return fmt.Sprintf("sqlite code %d", int(e)) }
func (e codeErr) Code() int     { return int(e) }

func TestDiskFull(t *testing.T) {
	for _, err := range []error{codeErr(13), &pgconn.PgError{Code: "53100", Message: "could not extend file"}} {
		got := dbError("create", "t1", fmt.Errorf("exec: %w", err))
		var se *snap.Error
		if !errors.Is(got, tasks.ErrStoreFull) || !errors.As(got, &se) || se.Code != snap.CodeServiceUnavailable || !errors.Is(got, err) {
			t.Errorf("%v → %v: want ErrStoreFull with a 5003 and the cause", err, got)
		}
	}
	for _, err := range []error{codeErr(5), &pgconn.PgError{Code: "23505"}, errors.New("x")} {
		if errors.Is(dbError("create", "t1", err), tasks.ErrStoreFull) {
			t.Errorf("%v taken for a full disk", err)
		}
	}
}

// The SQLite connections are configured as the package says, and the files
// are private.
func TestSQLiteSettings(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s := open(t, "sqlite:"+filepath.Join(dir, "tasks.db"), Options{})
	if _, err := s.Create(ctx, task("s1", "alice")); err != nil {
		t.Fatal(err)
	}
	pragma := func(db *sql.DB, name string) string {
		t.Helper()
		var v string
		if err := db.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
			t.Fatalf("PRAGMA %s: %v", name, err)
		}
		return v
	}
	for db, want := range map[*sql.DB]map[string]string{
		s.w: {"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "10000", "query_only": "0"},
		s.r: {"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "10000", "query_only": "1"},
	} {
		for name, v := range want {
			if got := pragma(db, name); got != v {
				t.Errorf("%s = %s, want %s", name, got, v)
			}
		}
	}
	if got := pragma(open(t, "sqlite:"+filepath.Join(dir, "tasks.db"), Options{Synchronous: "normal"}).w, "synchronous"); got != "1" {
		t.Errorf("Synchronous NORMAL: synchronous = %s", got)
	}
	if _, err := OpenOptions(ctx, "sqlite:"+filepath.Join(dir, "x.db"), Options{Synchronous: "off"}); err == nil {
		t.Error("Synchronous OFF accepted")
	}
	for _, name := range []string{"data", "data/tasks.db", "data/tasks.db-wal"} {
		fi, err := os.Stat(filepath.Join(filepath.Dir(dir), name))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), want)
		}
	}
	if st := s.Dialect(); st != "sqlite" {
		t.Errorf("Dialect = %s", st)
	}
}

// TestListIndexes checks the indexes on tasks, in both schemas: those
// the store's queries read, and no other (each is one more B-tree written
// by every task's commit; tasks_context, read by a context filter no
// caller sets, was dropped by migration 0007). On SQLite, each List a
// caller makes (the service's Known, the reconcile pass, the console, the
// task list command) reads its index in List's order, with no sort and no
// scan of the table.
func TestListIndexes(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		q := "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND name NOT LIKE 'sqlite_autoindex_%'"
		if s.Dialect() == "postgres" {
			q = "SELECT indexname FROM pg_indexes WHERE tablename = 'tasks' AND schemaname = current_schema() AND indexname <> 'tasks_pkey'"
		}
		rows, err := s.r.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var have []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			have = append(have, n)
		}
		rows.Close()
		slices.Sort(have)
		if want := []string{"tasks_created", "tasks_idempotency", "tasks_owner", "tasks_state", "tasks_terminal"}; !slices.Equal(have, want) {
			t.Errorf("indexes on tasks: %v, want %v", have, want)
		}
		if s.Dialect() != "sqlite" {
			return
		}
		live := []tasks.State{tasks.StateSubmitted, tasks.StateWorking, tasks.StateInputRequired}
		answered := []tasks.State{tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled}
		for _, c := range []struct {
			name  string
			f     tasks.Filter
			index string
		}{
			{"Known", tasks.Filter{Owner: "a", States: answered, Limit: 1, Brief: true}, "tasks_owner"},
			{"reconcile", tasks.Filter{States: live, Brief: true}, "tasks_state"},
			{"console", tasks.Filter{Limit: 201, Newest: true, Brief: true}, "tasks_created"},
			{"console by requester", tasks.Filter{Owner: "a", Limit: 201, Newest: true, Brief: true}, "tasks_owner"},
			{"console by state", tasks.Filter{States: []tasks.State{tasks.StateWorking}, Limit: 201, Newest: true, Brief: true}, "tasks_state"},
			{"task list", tasks.Filter{}, "tasks_created"},
			{"task list --limit", tasks.Filter{Limit: 10}, "tasks_created"},
			{"task list --from", tasks.Filter{Owner: "a"}, "tasks_owner"},
			{"task list --state", tasks.Filter{States: []tasks.State{tasks.StateCompleted}}, "tasks_state"},
		} {
			query, args := listQuery(c.f)
			plan := testdb.QueryPlan(t, s.r, query, args...)
			p := strings.Join(plan, "; ")
			if !strings.Contains(p, "USING INDEX "+c.index) || slices.Contains(plan, "SCAN tasks") ||
				(c.f.States == nil || len(c.f.States) == 1) && strings.Contains(p, "TEMP B-TREE") {
				t.Errorf("%s: plan %q, want %s, no scan of the table and no sort", c.name, p, c.index)
			}
		}
	})
}

// An idempotency key outlives the service that saw it: a new service on
// the same database (a restart) returns the task the key created.
func TestIdempotencyKeyAcrossServices(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	payload := []byte(`{"idempotencyKey":"order-42","message":{"messageId":"m1","role":"user","parts":[{"text":"once"}]}}`)
	const owner = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
	var _ tasks.KeyFinder = (*Store)(nil)

	s1, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	first, err := taskstest.Send(ctx, tasks.NewService(s1, tasks.ServiceOptions{}), owner, payload)
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()

	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	again, err := taskstest.Send(ctx, tasks.NewService(s2, tasks.ServiceOptions{}), owner, payload)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || len(again.History) != 1 {
		t.Fatalf("retry after a restart made task %s (history %d), want %s unchanged", again.ID, len(again.History), first.ID)
	}
	list, _ := s2.List(ctx, tasks.Filter{Owner: owner})
	if len(list) != 1 {
		t.Errorf("%d tasks for the key, want 1", len(list))
	}
}
