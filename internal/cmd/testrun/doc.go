// Command testrun is the project's test command: it runs `go test -json`
// with its arguments (./... when there are none), prints one line per
// package as it finishes and every failing test's output, and ends with
// one line that counts what ran and says what was skipped and the command
// that runs it. Its exit status is go test's. Unless the arguments give a
// -timeout, each package's tests may run 30 minutes (go test's default is
// 10); a test still running when its package's binary stops (a time-out,
// a panic) is reported as failed, with the panic.
//
// A run of the whole module (./...) then runs the tests of the packages on
// the secp256k1 request path once more with -tags libsecp256k1, the C
// implementation, when pkg-config finds libsecp256k1 and cgo is on; the
// last line says when that run was left out and why.
//
//	go run ./internal/cmd/testrun -race ./...
package main
