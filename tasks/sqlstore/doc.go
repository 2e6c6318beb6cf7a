// Package sqlstore keeps tasks (a tasks.Store) and the replay record (a
// snap.ReplayStore) in SQL: SQLite by default, PostgreSQL when several
// snapnode processes share one database. One implementation serves both,
// over database/sql; the dialects differ only in placeholders, a row lock
// and column types.
//
//	store, err := sqlstore.Open(ctx, "sqlite:/var/lib/snapnode/snapnode.db")
//	// or sqlstore.Open(ctx, "postgres://snapnode@db.internal:5432/snapnode?sslmode=verify-full")
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//
//	svc := tasks.NewService(store, tasks.ServiceOptions{})       // tasks.Store
//	val := snap.NewValidator(snap.Config{Replay: store.ReplayStore(), …}) // snap.ReplayStore
//	go store.ReplayStore().RunSweeper(ctx, time.Minute, 5*time.Minute, nil)     // ends with ctx
//
// Open chooses the dialect from the DSN: postgres:// or postgresql:// is
// PostgreSQL (any pgx connection URL); sqlite:PATH or a bare file path is
// SQLite, created (0600) if missing. OpenOptions tunes the pool sizes and
// SQLite's synchronous setting.
//
// # Schema
//
// Open (and New) apply the migrations embedded from migrations/<dialect>/, in
// order, in one transaction, and record them in snapnode_migrations (the table
// every component of the node records its migrations in) as "tasks"; a
// database of an older build, which kept them in schema_migrations, is taken
// over without applying anything twice. Two processes opening one new
// database at once are serialized (PostgreSQL: an advisory
// lock; SQLite: the write lock of BEGIN IMMEDIATE). A database migrated by a
// newer build is refused (ErrSchemaTooNew).
//
//	tasks(id PK, owner, context_id, state, status_ts, status_message, version,
//	      idempotency_key, created_at, updated_at, history, artifacts, metadata)
//	      indexes: (owner, created_at, id), (state, …), (created_at, id),
//	      (owner, idempotency_key) where a key is set, (status_ts) of ended tasks
//	task_keys(owner, idem_key) PK, task_id → tasks ON DELETE CASCADE (indexed):
//	      the idempotency keys sent with messages to existing tasks
//	replay(sender, msg_id) PK, first_seen, expires (indexed), fingerprint
//	node_identity(id = 1 PK, address, recorded_at): the address of the node
//	      whose database this is (Identity, RecordIdentity), one row at most
//
// What List filters on and orders by are columns with an index each (but
// the context, which no caller of the node filters on alone);
// history, artifacts and metadata are JSON text, read and written whole with
// the task (every Store call returns the whole task), so a task is one row:
// Create is one INSERT and Get one indexed SELECT. Appends add to the JSON
// array as bytes without decoding it. Times are microseconds since the Unix
// epoch in both dialects (the service's precision, and PostgreSQL's).
//
// # Concurrency and durability
//
// Every change runs in a transaction that reads the task, checks the
// expected version (tasks.ErrVersionConflict) and the state machine
// (tasks.CheckUpdate) and writes it; on PostgreSQL the row is locked
// (SELECT … FOR UPDATE), and SQLite has one writer. The UPDATE also names the
// version it read, so a change is never applied twice.
//
// Apply records an outcome (state, artifacts, their events) with one
// SELECT … FOR UPDATE, one UPDATE and one multi-row INSERT of events;
// ApplyTx does the same inside a transaction of the caller on the same
// database (the executor's last commit of an action), so that the
// caller's record and the task's state commit together.
//
// # Live tasks
//
// A Store opened with NewLimited bounds each owner's live (not ended)
// tasks and all of them, as a tasks.MemoryStore does (tasks.LiveCount):
// past a bound Create refuses a live task with tasks.ErrStoreFull and a
// 5002 or 5003. The count is held in memory, so that Create reads nothing
// more: one grouped query over the index on state reads it at start, and
// the store follows the tasks it creates, ends (Update, Apply, ApplyTx)
// and imports. A store that shares its database with other processes (the
// replicas of a node on PostgreSQL) counts only what it did; RecountLive,
// run every minute by RunRecount, reads everyone's again, so a task
// another replica created or ended is counted within the minute.
//
// The database itself is opened by internal/sqldb, which New accepts so that
// other components (the audit log) share it. SQLite runs in WAL mode with
// synchronous=FULL: a write returns once it is on disk, so an accepted task
// survives a crash of the process or of the machine (ReplayStoreNoSync's
// records alone do not wait for the disk; see Replay). Concurrent writes share
// a commit (group commit): one goroutine owns the writer connection and
// commits whatever writes are waiting in one transaction, each in its own
// savepoint. Reads use a separate pool of read-only connections and never
// wait for the writer.
//
// # Replay
//
// ReplayStore.Remember is one INSERT … ON CONFLICT DO UPDATE … WHERE the
// stored record has expired: the database decides atomically, across
// connections and processes, which of several concurrent calls for one
// (from, id) is fresh. With PostgreSQL this is what lets replicas sharing an
// identity process each message exactly once. The records of
// ReplayStoreNoSync do not wait for the disk: the decision is made when the
// row is inserted, and the next write of the request (its task, or
// whatever else it makes durable in this database) waits for the disk and
// carries the record there with it. A killed process loses no record; a
// power cut may lose the record of a request that left nothing durable,
// and a replay of that request gets the same answer, without effect (see
// ReplayStore.Remember). A request whose record its handler writes (a
// snap.ReplayClaim) has it written in the transaction of its task's
// creation (CreateKeeping) or of the message it appends (WithClaim), and
// the change is made only if the record is: an append that fails leaves
// the request's id unspent.
//
// On PostgreSQL the replay record and a task's creation (with its event
// and the request's kept result) are one autocommitted statement each:
// one round trip to the server apiece.
package sqlstore
