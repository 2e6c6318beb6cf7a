// Package testutil runs the node as a real child process for tests, so
// that they can kill it with SIGKILL and start it again on the same data:
//
//   - Daemon is `snapnode run` built from this module (once per test
//     binary, see Main and Binary), started on free loopback ports with a
//     data folder, waited for until it prints its `snapnode ready` line,
//     killed and restarted;
//   - Child is the test binary itself started again to run one test as a
//     child process (a writer, or a node built with test hooks), whose
//     output lines the parent reads and which it SIGKILLs at a point it
//     chooses.
//
// A package whose tests run the daemon builds it once with
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
//
// and a test then runs, kills and restarts it:
//
//	d := testutil.StartDaemon(t, testutil.DaemonOptions{DataDir: dir, Args: []string{"--http-listen", "127.0.0.1:0"}})
//	… d.HTTPURL, d.Address …
//	d.Kill(t)
//	d = d.Restart(t)
//
// It holds test helpers only: no production code imports it.
package testutil
