package agent

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzHistoryDecode: a stored body, whatever it holds, decodes or fails
// without a panic; interactions encoded one after another, each on the
// messages of the one before, decode back to their exact messages.
func FuzzHistoryDecode(f *testing.F) {
	f.Add(`{"sequence":1,"request":{"messages_base":0,"messages_kept":2,"messages":[{"role":"user","content":"x"}]}}`, "a|b|c", 1)
	f.Add(`{"sequence":0,"request":{"messages":[],"messages_sha256":"00"}}`, "", 0)
	f.Add(`{"sequence":3,"request":{"messages_base":2,"messages_kept":-1}}`, "a||b", 3)
	f.Fuzz(func(t *testing.T, body, contents string, cut int) {
		var d historyDecoder
		d.decode([]byte(body)) // must not panic

		// Each call sends the earlier call's messages, but for the last
		// cut, then one more.
		var its []Interaction
		var prev []ChatMessage
		for i, c := range strings.Split(contents, "|") {
			msgs := append([]ChatMessage{}, prev[:max(0, len(prev)-max(cut, 0)%4)]...)
			msgs = append(msgs, ChatMessage{Role: RoleUser, Content: c})
			it := Interaction{Sequence: i, Request: Request{Messages: msgs}}
			if i > 0 {
				it.base, it.baseSeq = prev, i-1
			}
			its, prev = append(its, it), msgs
		}
		var rd historyDecoder
		for _, it := range its {
			b, err := encodeInteraction(&it)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rd.decode(b)
			if err != nil {
				t.Fatalf("interaction %d: %v", it.Sequence, err)
			}
			want := slices.Clone(it.Request.Messages)
			for i := range want {
				want[i].Content = asRead(want[i].Content)
			}
			if !reflect.DeepEqual(got.Request.Messages, want) {
				t.Fatalf("interaction %d: messages %v, want %v", it.Sequence, got.Request.Messages, it.Request.Messages)
			}
		}
	})
}
