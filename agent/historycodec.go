package agent

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrHistoryMismatch: a stored interaction's messages, rebuilt from what
// the history holds, are not the exact messages its hash says were sent
// (the history was altered, or an earlier interaction it builds on is
// missing).
var ErrHistoryMismatch = errors.New("agent: stored messages do not rebuild the request sent")

// The store keeps each model call's exact messages without storing again
// what an earlier call already sent: the system prompt and the task's
// message, and every earlier answer and observation, are the first
// messages of each later call too. An interaction's stored request holds
// the sequence of the interaction whose messages it starts from
// (messages_base), how many of those it keeps (messages_kept), the
// messages it adds (messages), and the SHA-256 of the exact messages sent
// (messages_sha256, see messagesHash). Reading the history rebuilds the messages in order and
// checks each hash, so what the history shows (job history, job replay)
// is the exact request sent, or an error naming the interaction. An
// interaction stored without messages_base holds all its messages.

// storedInteraction is an Interaction as the store writes it: its request
// in the stored form.
type storedInteraction struct {
	*Interaction
	Request storedRequest `json:"request"`
}

type storedRequest struct {
	Base         *int            `json:"messages_base,omitempty"`
	Kept         int             `json:"messages_kept,omitempty"`
	Messages     []ChatMessage   `json:"messages,omitempty"`
	SHA256       string          `json:"messages_sha256,omitempty"`
	Prompt       string          `json:"prompt,omitempty"`
	FilesContext []string        `json:"files_context,omitempty"`
	Metadata     RequestMetadata `json:"metadata"`
}

// messagesHash is the hex SHA-256 of msgs, each message's role and then
// its content written as an 8-byte big-endian length and the bytes, as
// they read back: JSON holds UTF-8 only, so a byte that is not is hashed
// as U+FFFD, the character encoding/json writes for it (and what a model
// server was sent).
func messagesHash(msgs []ChatMessage) string {
	h := sha256.New()
	buf := make([]byte, 4096) // the strings go through it: no copy of each
	put := func(s string) {
		s = asRead(s)
		h.Write(binary.BigEndian.AppendUint64(buf[:0], uint64(len(s))))
		for len(s) > 0 {
			n := copy(buf, s)
			h.Write(buf[:n])
			s = s[n:]
		}
	}
	for _, m := range msgs {
		put(m.Role)
		put(m.Content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// asRead is s with each byte that is not UTF-8 replaced by U+FFFD, as
// encoding/json writes it.
func asRead(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as utf8.RuneError
	}
	return b.String()
}

// encodeInteraction is it's stored JSON: its messages as what they add to
// those of the interaction it.base came from (it.baseSeq), when they start
// with any of them; all of them otherwise.
func encodeInteraction(it *Interaction) ([]byte, error) {
	r := it.Request
	sr := storedRequest{Messages: r.Messages, Prompt: r.Prompt, FilesContext: r.FilesContext, Metadata: r.Metadata}
	if len(r.Messages) > 0 {
		sr.SHA256 = messagesHash(r.Messages)
		kept := 0
		for kept < len(it.base) && kept < len(r.Messages) && it.base[kept] == r.Messages[kept] {
			kept++
		}
		if kept > 0 {
			seq := it.baseSeq
			sr.Base, sr.Kept, sr.Messages = &seq, kept, r.Messages[kept:]
		}
	}
	b, err := json.Marshal(storedInteraction{Interaction: it, Request: sr})
	if err != nil {
		return nil, fmt.Errorf("agent: encode interaction: %w", err)
	}
	return b, nil
}

// historyDecoder reads a job's stored interactions, in order, back into
// Interactions with their exact messages.
type historyDecoder struct {
	msgs map[int][]ChatMessage // by sequence: each interaction's messages
	// lastOnly keeps the messages of the newest interaction that has
	// any, and forgets the others': the runtime stores a call's messages
	// as what they add to that interaction's (see Runtime's call), so a
	// history read in order needs no other, and a stream of it holds
	// one call's messages at a time.
	lastOnly bool
}

// decode is the Interaction stored as b; the interactions before it went
// through d first.
func (d *historyDecoder) decode(b []byte) (Interaction, error) {
	var it Interaction
	st := storedInteraction{Interaction: &it}
	if err := json.Unmarshal(b, &st); err != nil {
		return Interaction{}, err
	}
	sr := st.Request
	msgs := sr.Messages
	if sr.Base != nil {
		base, ok := d.msgs[*sr.Base]
		if !ok || sr.Kept < 0 || sr.Kept > len(base) {
			return Interaction{}, fmt.Errorf("interaction %d: request.messages_base: %d messages of interaction %d: %w",
				it.Sequence, sr.Kept, *sr.Base, ErrHistoryMismatch)
		}
		msgs = make([]ChatMessage, 0, sr.Kept+len(sr.Messages))
		msgs = append(append(msgs, base[:sr.Kept]...), sr.Messages...)
		it.base, it.baseSeq = base, *sr.Base
	}
	if sr.SHA256 != "" {
		if messagesHash(msgs) != sr.SHA256 {
			return Interaction{}, fmt.Errorf("interaction %d: request.messages_sha256: %w", it.Sequence, ErrHistoryMismatch)
		}
	}
	it.Request = Request{Messages: msgs, MessagesSHA256: sr.SHA256, Prompt: sr.Prompt, FilesContext: sr.FilesContext, Metadata: sr.Metadata}
	if len(msgs) > 0 {
		if d.msgs == nil {
			d.msgs = make(map[int][]ChatMessage)
		}
		if d.lastOnly {
			clear(d.msgs)
		}
		d.msgs[it.Sequence] = msgs
	}
	return it, nil
}
