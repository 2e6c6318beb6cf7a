// Package testclock is a settable clock for tests of components that take
// a `Now func() time.Time`:
//
//	c := testclock.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
//	log, _ := audit.New(ctx, db, audit.Options{Now: c.Now})
//	c.Advance(time.Hour)
package testclock
