// Command seedtasks fills a node's task database with seeded tasks for a
// load test of a large store (docs/benchmarks.md), fast: bulk transactions
// through the store's own schema (sqlstore.Import), not a request each.
//
//	go run ./internal/cmd/seedtasks -database DIR/tasks.db -tasks 1000000 -owners 50 -peer-seed bench
//	go run ./internal/cmd/seedtasks -database DIR/tasks.db -count
//
// Task j (seed-00000000, …) is owned by the address of loadgen.PeerKey(seed,
// j mod owners), so that `snapnode bench --peer-seed SEED --seeded N
// --owners OWNERS` has each peer read tasks it owns. Every task has ended
// (a node resumes open ones at start): one in ten completed with an
// artifact, the others failed. Task j's status time is -age ago plus j
// milliseconds, so that a retention of -age minus D removes the tasks j <
// D/1ms. The database is created if it does not exist (SQLite
// file, or a PostgreSQL URL). -count prints the tasks by state instead.
package main
