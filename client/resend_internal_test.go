package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/gorilla/websocket"
)

// The resend rule, one for HTTP and WebSocket: each failure an attempt
// may end with, over either transport, is classified, and a request is
// sent again when the agent did not read it, never when it said it took
// it or held it quiet, and after a cut only with an idempotencyKey; the
// idempotent tasks/ methods whatever the end.
func TestResendRule(t *testing.T) {
	ctx := context.Background()
	idle, stop := context.WithCancelCause(ctx)
	stop(ErrIdleTimeout)
	refused := &websocket.CloseError{Code: websocket.CloseMessageTooBig}
	for _, tc := range []struct {
		name string
		err  error
		end  ending
	}{
		// Not read: nothing or not all of it went out, or the agent said
		// it did not read it.
		{"dial refused", fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED), endNotRead},
		{"TLS failure", errors.New("tls: failed to verify certificate"), endNotRead},
		{"closed while written", fmt.Errorf("write: %w", syscall.EPIPE), endNotRead},
		{"upgrade refused", fmt.Errorf("%w %w", &StatusError{StatusCode: 500}, errUpgrade), endNotRead},
		{"HTTP 413", &StatusError{StatusCode: http.StatusRequestEntityTooLarge}, endNotRead},
		{"HTTP 429", &StatusError{StatusCode: http.StatusTooManyRequests}, endNotRead},
		{"HTTP 502", &StatusError{StatusCode: http.StatusBadGateway}, endNotRead},
		{"HTTP 503", &StatusError{StatusCode: http.StatusServiceUnavailable}, endNotRead},
		{"HTTP 504", &StatusError{StatusCode: http.StatusGatewayTimeout}, endNotRead},
		{"WebSocket 1009", wsErr(ctx, refused), endNotRead},
		// Taken: the agent answered so.
		{"HTTP 500", &StatusError{StatusCode: http.StatusInternalServerError}, endTook},
		{"HTTP 204", fmt.Errorf("%w: %w", ErrNoAnswer, errNoContent), endTook},
		{"event stream with no event", fmt.Errorf("%w %w", ErrIdleTimeout, errStreamBegun), endTook},
		// Written in full, then nothing.
		{"HTTP EOF before the status line", unanswered(ctx, io.EOF), endCut},
		{"HTTP reset before the status line", unanswered(ctx, fmt.Errorf("read: %w", syscall.ECONNRESET)), endCut},
		{"HTTP 200 body cut", unanswered(ctx, io.ErrUnexpectedEOF), endCut},
		{"WebSocket close 1011", unanswered(ctx, wsErr(ctx, &websocket.CloseError{Code: websocket.CloseInternalServerErr})), endCut},
		{"HTTP response header time-out", unanswered(ctx, os.ErrDeadlineExceeded), endQuiet},
		{"SSE idle time-out before the headers", unanswered(idle, context.Canceled), endQuiet},
		{"WebSocket idle time-out", unanswered(ctx, ErrIdleTimeout), endQuiet},
		// The caller's end is not marked: the exchange ends with it.
		{"caller's end", unanswered(canceled(), context.Canceled), endNotRead},
	} {
		if got := endingOf(tc.err); got != tc.end {
			t.Errorf("%s (%v): ending %d, want %d", tc.name, tc.err, got, tc.end)
		}
	}

	// Over WebSocket, the closes that say the request was not read.
	for code, notRead := range map[int]bool{
		websocket.CloseMessageTooBig: true, websocket.CloseUnsupportedData: true, websocket.CloseGoingAway: true,
		websocket.CloseNormalClosure: false, websocket.CloseInternalServerErr: false, websocket.CloseAbnormalClosure: false,
	} {
		if got := wsNotRead(&websocket.CloseError{Code: code}); got != notRead {
			t.Errorf("close %d: not read %v, want %v", code, got, notRead)
		}
	}

	for _, tc := range []struct {
		method string
		end    ending
		keyed  bool
		want   bool
	}{
		{"message/send", endNotRead, false, true},
		{"message/send", endNotRead, true, true},
		{"message/send", endTook, false, false},
		{"message/send", endTook, true, false},
		{"message/send", endQuiet, false, false},
		{"message/send", endQuiet, true, false},
		{"message/send", endCut, false, false},
		{"message/send", endCut, true, true},
		{"message/stream", endCut, false, false},
		{"message/stream", endCut, true, true},
		{"message/stream", endQuiet, true, false},
		{"service/call", endCut, false, false},
		{"service/call", endNotRead, false, true},
		{"some/unknown", endCut, false, false},
		{"tasks/get", endTook, false, true},
		{"tasks/get", endQuiet, false, true},
		{"tasks/cancel", endCut, false, true},
		{"tasks/resubscribe", endQuiet, false, true},
	} {
		if got := resend(tc.method, tc.end, tc.keyed); got != tc.want {
			t.Errorf("resend(%s, ending %d, keyed %v) = %v, want %v", tc.method, tc.end, tc.keyed, got, tc.want)
		}
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
