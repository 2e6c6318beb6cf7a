// Package testreport reads the event stream of `go test -json` and tells a
// person what happened: one line per package as it finishes, the output
// of every failing test in full, and a last line that counts the tests
// run, passed, failed and skipped, with the skips grouped by what they
// were missing and the command that runs them.
//
// The project's test command (internal/cmd/testrun) is `go test -json`
// piped through a Report:
//
//	rep := testreport.New(os.Stdout, testreport.ProjectNeeds())
//	err := rep.Read(stdoutOfGoTest) // prints as packages finish
//	rep.Summary()                   // "ran 1,204 tests in 58 packages: …"
package testreport
