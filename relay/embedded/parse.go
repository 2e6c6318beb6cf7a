package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"
)

// limits are the bounds the parser and the connection enforce; they come
// from Config after defaults.
type limits struct {
	maxMessageLength int
	maxSubscriptions int
	maxFilters       int
	maxFilterValues  int
	maxLimit         int
	defaultLimit     int
	maxSubIDLength   int
	maxEventTags     int
	maxContentLength int
}

// msgType is the type of a client message.
type msgType int

const (
	msgEvent msgType = iota + 1
	msgReq
	msgClose
)

// clientMessage is one parsed client-to-relay message.
type clientMessage struct {
	typ     msgType
	event   *nostr.Event // EVENT
	subID   string       // REQ, CLOSE
	filters []*filter    // REQ
}

// replyType says how a refused message is answered.
type replyType int

const (
	replyNotice replyType = iota // ["NOTICE", msg]
	replyOK                      // ["OK", ref, false, msg]
	replyClosed                  // ["CLOSED", ref, msg]
)

// refusal is a client message the relay will not act on, with the answer
// the client gets. msg starts with a NIP-01 machine-readable prefix.
type refusal struct {
	reply replyType
	ref   string // the event id (OK) or subscription id (CLOSED)
	msg   string
}

func (r *refusal) Error() string { return r.msg }

func notice(format string, args ...any) *refusal {
	return &refusal{reply: replyNotice, msg: fmt.Sprintf(format, args...)}
}

func okFalse(id, format string, args ...any) *refusal {
	return &refusal{reply: replyOK, ref: id, msg: fmt.Sprintf(format, args...)}
}

func closed(subID, format string, args ...any) *refusal {
	return &refusal{reply: replyClosed, ref: subID, msg: fmt.Sprintf(format, args...)}
}

// parseClientMessage parses one WebSocket text message. Input longer than
// lim.maxMessageLength is refused before any parsing, so the work and the
// memory spent are bounded by the limit. The error, when not nil, is a
// *refusal saying how to answer.
func parseClientMessage(b []byte, lim *limits) (*clientMessage, error) {
	if len(b) > lim.maxMessageLength {
		return nil, notice("invalid: message too large (%d > %d bytes)", len(b), lim.maxMessageLength)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(b, &arr); err != nil || arr == nil {
		return nil, notice("invalid: could not parse message: not a JSON array")
	}
	if len(arr) == 0 {
		return nil, notice("invalid: empty message")
	}
	var label string
	if isNull(arr[0]) || json.Unmarshal(arr[0], &label) != nil {
		return nil, notice("invalid: the first element must be the message type")
	}
	switch label {
	case "EVENT":
		if len(arr) < 2 {
			return nil, notice("invalid: EVENT without an event")
		}
		ev, id, err := parseEvent(arr[1], lim)
		if err != nil {
			return nil, okFalse(id, "invalid: %v", err)
		}
		if len(arr) > 2 {
			return nil, okFalse(id, "invalid: EVENT has more than one element after its type")
		}
		return &clientMessage{typ: msgEvent, event: ev}, nil
	case "REQ":
		subID, err := parseSubID(arr, label, lim)
		if err != nil {
			return nil, err
		}
		n := len(arr) - 2
		switch {
		case n == 0:
			return nil, closed(subID, "invalid: REQ needs at least one filter")
		case n > lim.maxFilters:
			return nil, closed(subID, "invalid: too many filters (%d > %d)", n, lim.maxFilters)
		}
		filters := make([]*filter, 0, n)
		for _, raw := range arr[2:] {
			f, err := parseFilter(raw, lim)
			if err != nil {
				if r, ok := err.(*refusal); ok {
					r.reply, r.ref = replyClosed, subID
					return nil, r
				}
				return nil, closed(subID, "invalid: %v", err)
			}
			filters = append(filters, f)
		}
		return &clientMessage{typ: msgReq, subID: subID, filters: filters}, nil
	case "CLOSE":
		subID, err := parseSubID(arr, label, lim)
		if err != nil {
			return nil, err
		}
		if len(arr) > 2 {
			return nil, notice("invalid: CLOSE takes only a subscription id")
		}
		return &clientMessage{typ: msgClose, subID: subID}, nil
	case "COUNT":
		subID, err := parseSubID(arr, label, lim)
		if err != nil {
			return nil, err
		}
		return nil, closed(subID, "unsupported: COUNT (NIP-45) is not supported")
	default:
		return nil, notice("unsupported: unknown message type %q", clip(label, 32))
	}
}

// parseSubID reads the subscription id of a REQ, CLOSE or COUNT.
func parseSubID(arr []json.RawMessage, label string, lim *limits) (string, error) {
	var id string
	if len(arr) < 2 || isNull(arr[1]) || json.Unmarshal(arr[1], &id) != nil {
		return "", notice("invalid: %s needs a subscription id string", label)
	}
	switch {
	case id == "":
		return "", notice("invalid: %s subscription id must not be empty", label)
	case len(id) > lim.maxSubIDLength:
		return "", closed(id, "invalid: subscription id too long (%d > %d)", len(id), lim.maxSubIDLength)
	}
	return id, nil
}

// eventFields are the members every event must have.
var eventFields = [...]string{"id", "pubkey", "created_at", "kind", "tags", "content", "sig"}

// parseEvent decodes an event object and checks its shape and limits (not
// its id or signature: see verify). It returns the id it found, when it is
// a string, even on error, for the OK answer.
func parseEvent(raw json.RawMessage, lim *limits) (*nostr.Event, string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, "", fmt.Errorf("the event must be a JSON object")
	}
	var id string
	if v, ok := m["id"]; ok {
		_ = json.Unmarshal(v, &id)
	}
	for _, k := range eventFields {
		if v, ok := m[k]; !ok || isNull(v) {
			return nil, id, fmt.Errorf("missing field %q", k)
		}
	}
	ev := &nostr.Event{}
	var created int64
	var tags []*[]*string // pointers, to refuse nulls
	for _, f := range []struct {
		name string
		dst  any
		want string
	}{
		{"id", &ev.ID, "a string"},
		{"pubkey", &ev.PubKey, "a string"},
		{"created_at", &created, "an integer"},
		{"kind", &ev.Kind, "an integer"},
		{"tags", &tags, "an array of arrays of strings"},
		{"content", &ev.Content, "a string"},
		{"sig", &ev.Sig, "a string"},
	} {
		if err := json.Unmarshal(m[f.name], f.dst); err != nil {
			return nil, id, fmt.Errorf("field %q must be %s", f.name, f.want)
		}
	}
	ev.CreatedAt = nostr.Timestamp(created)
	ev.Tags = make(nostr.Tags, len(tags))
	for i, t := range tags {
		if t == nil {
			return nil, id, fmt.Errorf("a tag must be an array of strings, not null")
		}
		tag := make(nostr.Tag, len(*t))
		for j, s := range *t {
			if s == nil {
				return nil, id, fmt.Errorf("tag elements must be strings, not null")
			}
			tag[j] = *s
		}
		ev.Tags[i] = tag
	}
	if err := checkShape(ev, lim); err != nil {
		return nil, id, err
	}
	return ev, ev.ID, nil
}

// parseFilter decodes one REQ filter.
func parseFilter(raw json.RawMessage, lim *limits) (*filter, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("a filter must be a JSON object")
	}
	f := &filter{}
	for k, v := range m {
		if isNull(v) {
			continue // as if absent
		}
		var err error
		switch {
		case k == "ids":
			err = decodeList(v, &f.ids, k, "strings")
		case k == "authors":
			err = decodeList(v, &f.authors, k, "strings")
		case k == "kinds":
			err = decodeList(v, &f.kinds, k, "integers")
		case k == "since":
			f.hasSince = true
			err = decodeInt(v, &f.since, k)
		case k == "until":
			f.hasUntil = true
			err = decodeInt(v, &f.until, k)
		case k == "limit":
			f.hasLimit = true
			var n int64
			if err = decodeInt(v, &n, k); err == nil {
				if n < 0 {
					err = fmt.Errorf("limit must not be negative")
				}
				f.limit = int(min(n, int64(lim.maxLimit)))
			}
		case k == "search":
			return nil, closed("", "unsupported: search (NIP-50) is not supported")
		case len(k) > 1 && k[0] == '#':
			var values []string
			err = decodeList(v, &values, k, "strings")
			f.tags = append(f.tags, tagFilter{name: k[1:], values: values})
		default:
			return nil, closed("", "unsupported: filter contains unknown element %q", clip(k, 32))
		}
		if err != nil {
			return nil, err
		}
	}
	f.finish()
	if n := f.valueCount(); n > lim.maxFilterValues {
		return nil, fmt.Errorf("too many values in a filter (%d > %d)", n, lim.maxFilterValues)
	}
	return f, nil
}

// decodeList decodes a JSON array of T into dst (never nil afterwards);
// null elements are refused, since json.Unmarshal would turn them into
// zero values.
func decodeList[T any](v json.RawMessage, dst *[]T, key, what string) error {
	var ptrs []*T
	if err := json.Unmarshal(v, &ptrs); err != nil {
		return fmt.Errorf("%q must be an array of %s", clip(key, 32), what)
	}
	out := make([]T, len(ptrs))
	for i, p := range ptrs {
		if p == nil {
			return fmt.Errorf("%q must be an array of %s", clip(key, 32), what)
		}
		out[i] = *p
	}
	*dst = out
	return nil
}

func decodeInt(v json.RawMessage, dst *int64, key string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%q must be an integer", key)
	}
	return nil
}

// isNull reports whether a JSON value is the literal null (which
// json.Unmarshal silently accepts for any destination).
func isNull(v json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// clip shortens s to at most n bytes, on a rune boundary, for echoing back
// client input in messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
