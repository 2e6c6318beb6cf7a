package tasks

import (
	"github.com/snapnode/snapnode/snap"
)

// The params of the task methods, as the transport's router decoded and
// validated them, once, from the request payload (snap's wire codec:
// snap.ParseSendParams and the others). The Service takes them and never
// reads a payload itself.
type (
	SendParams        = snap.SendParams
	GetParams         = snap.GetParams
	CancelParams      = snap.CancelParams
	ResubscribeParams = snap.ResubscribeParams
)

// TaskResponse is the payload of a successful response to message/send,
// tasks/get and tasks/cancel.
type TaskResponse struct {
	Task *Task `json:"task"`
}

var (
	_ snap.Shrinker    = (*TaskResponse)(nil)
	_ snap.TaskCarrier = (*TaskResponse)(nil)
)

// TaskID returns the id of the task the response carries.
func (r *TaskResponse) TaskID() string {
	if r.Task == nil {
		return ""
	}
	return r.Task.ID
}

// TaskState returns the state of the task the response carries.
func (r *TaskResponse) TaskState() string {
	if r.Task == nil {
		return ""
	}
	return string(r.Task.Status.State)
}

// Shrink makes the response smaller for a transport that cannot carry it
// whole: it drops the older half of the task's history (the last message
// goes last). It reports false when there is no history left to drop; the
// artifacts, which are the task's results, are never dropped.
func (r *TaskResponse) Shrink() bool {
	if r.Task == nil || len(r.Task.History) == 0 {
		return false
	}
	r.Task = r.Task.TrimHistory(len(r.Task.History) / 2)
	return true
}

// The payload is the root of every field path in errors.
const root = "payload"
