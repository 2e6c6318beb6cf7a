package taskstest

import (
	"context"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// Send is tasks.Service.SendMessage of a message/send payload.
func Send(ctx context.Context, s *tasks.Service, owner string, payload []byte) (*tasks.Task, error) {
	p, err := snap.ParseSendParams(payload)
	if err != nil {
		return nil, err
	}
	return s.SendMessage(ctx, owner, p)
}

// Get is tasks.Service.GetTask of a tasks/get payload.
func Get(ctx context.Context, s *tasks.Service, requester string, payload []byte) (*tasks.Task, error) {
	p, err := snap.ParseGetParams(payload)
	if err != nil {
		return nil, err
	}
	return s.GetTask(ctx, requester, p)
}

// Cancel is tasks.Service.CancelTask of a tasks/cancel payload.
func Cancel(ctx context.Context, s *tasks.Service, requester string, payload []byte) (*tasks.Task, error) {
	p, err := snap.ParseCancelParams(payload)
	if err != nil {
		return nil, err
	}
	return s.CancelTask(ctx, requester, p)
}
