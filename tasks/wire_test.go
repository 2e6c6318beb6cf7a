package tasks

import (
	"context"
	"strings"

	"github.com/snapnode/snapnode/snap"
)

// The Service as the router calls it: each payload decoded and validated
// by snap's wire codec first, a payload that fails answered with the
// codec's error (as package taskstest does for other packages' tests).

func sendJSON(ctx context.Context, s *Service, owner string, payload []byte) (*Task, error) {
	p, err := snap.ParseSendParams(payload)
	if err != nil {
		return nil, err
	}
	return s.SendMessage(ctx, owner, p)
}

func getJSON(ctx context.Context, s *Service, requester string, payload []byte) (*Task, error) {
	p, err := snap.ParseGetParams(payload)
	if err != nil {
		return nil, err
	}
	return s.GetTask(ctx, requester, p)
}

func cancelJSON(ctx context.Context, s *Service, requester string, payload []byte) (*Task, error) {
	p, err := snap.ParseCancelParams(payload)
	if err != nil {
		return nil, err
	}
	return s.CancelTask(ctx, requester, p)
}

func streamJSON(ctx context.Context, s *Service, owner string, payload []byte, emit func(any) error) (*Task, error) {
	p, err := snap.ParseSendParams(payload)
	if err != nil {
		return nil, err
	}
	return s.StreamMessage(ctx, owner, p, emit)
}

func resubscribeJSON(ctx context.Context, s *Service, requester string, payload []byte, emit func(any) error) (*Task, error) {
	p, err := snap.ParseResubscribeParams(payload)
	if err != nil {
		return nil, err
	}
	return s.StreamResubscribe(ctx, requester, p, emit)
}

// send builds a message/send payload whose parts are partsJSON.
func send(partsJSON string) string {
	return `{"message":{"messageId":"m1","role":"user","parts":[` + partsJSON + `]}}`
}

func quote(s string) string { return `"` + s + `"` }

func repeatParts(n int) string {
	return strings.TrimSuffix(strings.Repeat(`{"text":"x"},`, n), ",")
}

// sendMsg builds a message/send payload with the given message members.
func sendMsg(members string) string { return `{"message":{` + members + `}}` }
