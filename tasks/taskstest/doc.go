// Package taskstest drives a tasks.Service with request payloads as peers
// send them, for tests: each payload is decoded and validated by snap's
// wire codec, as the node's router does, before the Service's typed
// method is called, and a payload that fails is that codec's *snap.Error.
package taskstest
