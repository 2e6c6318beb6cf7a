// Package audittest records audit entries in memory, for the tests of
// components that append to an audit log through a small interface of
// their own (a worker pool, a delegate):
//
//	rec := &audittest.Recorder{}
//	pool, err := worker.New(worker.Config{…, Audit: rec})
//	…
//	if es := rec.Entries(); len(es) != 1 { … }
package audittest
