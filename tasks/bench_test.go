package tasks

import (
	"context"
	"fmt"
	"math"
	"testing"
)

func BenchmarkSendMessage(b *testing.B) {
	ctx := context.Background()
	s := NewService(NewMemoryStore(MemoryStoreOptions{MaxTasks: math.MaxInt}), ServiceOptions{})
	payload := []byte(`{"message":{"messageId":"550e8400-e29b-41d4-a716-446655440000","role":"user","parts":[` +
		`{"text":"Summarize the README and list the open issues."},` +
		`{"data":{"schema_version":"1.0.0","action":"read_file","args":{"path":"/sandbox/README.md"}},"mediaType":"application/json"}]}}`)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sendJSON(ctx, s, alice, payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetTask(b *testing.B) {
	ctx := context.Background()
	for _, history := range []int{1, 20} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			s, _ := newService(b, ServiceOptions{})
			task := mustSend(b, s, alice, send(`{"text":"hello"}`))
			for i := 2; i <= history; i++ {
				mustSend(b, s, alice, continuePayload(task.ID, fmt.Sprintf("m%d", i), "more text"))
			}
			payload := []byte(getPayload(task.ID))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := getJSON(ctx, s, alice, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
