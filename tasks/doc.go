// Package tasks will hold the durable SNAP task engine: Task, Status,
// Artifact, Part, history and contexts; the state machine; the Store
// interface with SQLite and PostgreSQL implementations; and the service
// behind message/send and tasks/*. Nothing is implemented yet: it arrives
// with the durable-tasks issue.
package tasks
