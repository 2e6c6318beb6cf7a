package snap_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// benchEvents is how many events one streamed request emits.
const benchEvents = 16

// benchStreamServer answers message/stream with benchEvents progress events
// and test/plain with one response, both with a progress-sized payload.
func benchStreamServer(b *testing.B) (*snap.Server, []byte, []byte) {
	progress := map[string]any{"taskId": "0b4e8a1c-2f6d-4c3e-9a7b-5d1e2f3a4b5c", "progress": 0.5,
		"message": "task working", "state": "working", "timestamp": "2026-02-04T10:00:00Z", "version": 7}
	r := snap.NewRouter()
	r.HandleStream("message/stream", func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		for range benchEvents {
			if err := emit(progress); err != nil {
				return nil, err
			}
		}
		return progress, nil
	})
	r.Handle("test/plain", func(ctx context.Context, req *snap.Verified) (any, error) { return progress, nil })
	s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), MaxResponseSize: 65535,
		Logger:    slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0)})})
	req := func(method string) []byte {
		m := &snap.Message{ID: "bench-" + strings.ReplaceAll(method, "/", "-"), Version: "0.1", Type: snap.TypeRequest, Method: method,
			From: keyA.Address(identity.Mainnet), To: keyB.Address(identity.Mainnet), Payload: []byte(`{"taskId":"t"}`), Timestamp: t0}
		if err := m.Sign(keyA); err != nil {
			b.Fatal(err)
		}
		raw, _ := m.MarshalJSON()
		return raw
	}
	return s, req("message/stream"), req("test/plain")
}

// BenchmarkStream measures a streamed request of benchEvents signed events
// and its final response, beside the baseline of the same request
// answered with one response (validation and one signature): the
// difference over benchEvents is the cost of one event, which is its
// BIP-340 signature and the size check.
func BenchmarkStream(b *testing.B) {
	s, stream, plain := benchStreamServer(b)
	ctx := context.Background()
	var baseline time.Duration
	b.Run("baseline-respond", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s.Respond(ctx, snap.Inbound{Raw: plain}) == nil {
				b.Fatal("no response")
			}
		}
		baseline = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		sent := 0
		send := func(*snap.Message) error { sent++; return nil }
		for b.Loop() {
			if s.Serve(ctx, snap.Inbound{Raw: stream}, send) == nil {
				b.Fatal("no response")
			}
		}
		if sent != benchEvents*b.N {
			b.Fatalf("%d events for %d streams", sent, b.N)
		}
		per := b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(per-baseline)/benchEvents, "ns/event")
	})
}
