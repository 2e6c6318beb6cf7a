// Package flock takes advisory locks (flock(2)) on open files without
// waiting: the one-node-per-data-folder lock, the sandbox's folder lock
// shared by replicas, and its temporary files' locks. A lock lasts until
// its file is closed or its process ends, a crash included.
//
//	switch err := flock.TryExclusive(f); {
//	case err == nil: // held
//	case errors.Is(err, flock.ErrHeld): // another open file holds it
//	case errors.Is(err, flock.ErrNoLocks): // the system or file system keeps none
//	}
//
// Written by hand: the standard library keeps its file locks internal,
// and the few lines over syscall.Flock need no dependency.
package flock
