package embedded

import (
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/jsondec"
)

// The parser as it was before it read a message in one pass: each element
// validated by the message's own pass, then decoded again. The one-pass
// parser must answer every message as it did (TestOnePassSameAsTwoPass,
// FuzzOnePassSameAsTwoPass).

// twoPassParseClientMessage parses one WebSocket text message. Input longer than
// lim.maxMessageLength is refused before any parsing, so the work and the
// memory spent are bounded by the limit. The error, when not nil, is a
// *refusal saying how to answer.
func twoPassParseClientMessage(b []byte, lim *limits) (*clientMessage, error) {
	if len(b) > lim.maxMessageLength {
		return nil, notice("invalid: message too large (%d > %d bytes)", len(b), lim.maxMessageLength)
	}
	// One pass validates the whole message and splits its elements
	// (raw values aliasing b); encoding/json would re-scan each element.
	pooled := jsondec.Get(b)
	defer jsondec.Put(pooled)
	dec := &pooled.Decoder
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, unparsable(b, lim, "not a JSON array")
	}
	var arr []jsontext.Value
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, unparsable(b, lim, "not a JSON array of valid JSON (I-JSON: no repeated member names, no invalid UTF-8 or lone surrogates)")
		}
		arr = append(arr, v)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, unparsable(b, lim, "not a JSON array")
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, unparsable(b, lim, "data after the array")
	}
	if len(arr) == 0 {
		return nil, notice("invalid: empty message")
	}
	if arr[0].Kind() != '"' {
		return nil, notice("invalid: the first element must be the message type")
	}
	label := unquote(arr[0])
	switch label {
	case "EVENT":
		if len(arr) < 2 {
			return nil, notice("invalid: EVENT without an event")
		}
		ev, id, err := twoPassParseEvent(arr[1], lim)
		if err != nil {
			return nil, okFalse(id, "invalid: %v", err)
		}
		if len(arr) > 2 {
			return nil, okFalse(id, "invalid: EVENT has more than one element after its type")
		}
		return &clientMessage{typ: msgEvent, event: ev}, nil
	case "REQ":
		subID, err := twoPassParseSubID(arr, label, lim)
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
			f, err := twoPassParseFilter(raw, lim)
			if err != nil {
				return nil, filterRefusal(subID, err)
			}
			filters = append(filters, f)
		}
		return &clientMessage{typ: msgReq, subID: subID, filters: filters}, nil
	case "CLOSE":
		subID, err := twoPassParseSubID(arr, label, lim)
		if err != nil {
			return nil, err
		}
		if len(arr) > 2 {
			return nil, notice("invalid: CLOSE takes only a subscription id")
		}
		return &clientMessage{typ: msgClose, subID: subID}, nil
	case "COUNT":
		subID, err := twoPassParseSubID(arr, label, lim)
		if err != nil {
			return nil, err
		}
		return nil, closed(subID, "unsupported: COUNT (NIP-45) is not supported")
	default:
		return nil, notice("unsupported: unknown message type %q", textcut.Prefix(label, 32))
	}
}

// twoPassParseEvent decodes an event object and checks its shape and limits (not
// its id or signature: see verify). It returns the id it found, when it is
// a string, even on error, for the OK answer.
func twoPassParseEvent(raw jsontext.Value, lim *limits) (*nostr.Event, string, error) {
	pooled := jsondec.Get(raw)
	defer jsondec.Put(pooled)
	dec := &pooled.Decoder
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, "", fmt.Errorf("the event must be a JSON object")
	}
	ev := &nostr.Event{}
	var seen [len(eventFields)]bool
	fail := func(format string, args ...any) (*nostr.Event, string, error) {
		return nil, ev.ID, fmt.Errorf(format, args...)
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return fail("the event must be a JSON object: %v", jsonReason(err))
		}
		k := slices.Index(eventFields[:], name.String())
		if k < 0 {
			if err := dec.SkipValue(); err != nil {
				return fail("the event must be a JSON object: %v", jsonReason(err))
			}
			continue
		}
		if dec.PeekKind() == 'n' {
			dec.SkipValue()
			continue // a null counts as missing
		}
		seen[k] = true
		switch f := eventFields[k]; f {
		case "id", "pubkey", "content", "sig":
			tok, err := dec.ReadToken()
			if err != nil || tok.Kind() != '"' {
				return fail("field %q must be a string", f)
			}
			switch f {
			case "id":
				ev.ID = tok.String()
			case "pubkey":
				ev.PubKey = tok.String()
			case "content":
				ev.Content = tok.String()
			case "sig":
				ev.Sig = tok.String()
			}
		case "created_at", "kind":
			tok, err := dec.ReadToken()
			if err != nil || tok.Kind() != '0' {
				return fail("field %q must be an integer", f)
			}
			n, err := strconv.ParseInt(tok.String(), 10, 64)
			if err != nil || f == "kind" && (n < math.MinInt32 || n > math.MaxInt32) {
				return fail("field %q must be an integer", f)
			}
			if f == "kind" {
				ev.Kind = int(n)
			} else {
				ev.CreatedAt = nostr.Timestamp(n)
			}
		case "tags":
			tags, err := readTags(dec)
			if err != nil {
				return fail("%v", err)
			}
			ev.Tags = tags
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return fail("the event must be a JSON object: %v", jsonReason(err))
	}
	for k, ok := range seen {
		if !ok {
			return fail("missing field %q", eventFields[k])
		}
	}
	if err := checkShape(ev, lim); err != nil {
		return nil, ev.ID, err
	}
	return ev, ev.ID, nil
}

// twoPassParseFilter decodes one REQ filter in one pass. A null member counts
// as absent; null list elements are refused.
func twoPassParseFilter(raw []byte, lim *limits) (*filter, error) {
	// Duplicate names are refused below, for less than the decoder's
	// general check costs.
	pooled := jsondec.Get(raw, jsontext.AllowDuplicateNames(true))
	defer jsondec.Put(pooled)
	dec := &pooled.Decoder
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errFilterObject
	}
	f := &filter{}
	var few [8]string
	seen := names{few: few[:0]}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, errFilterObject
		}
		k := name.String()
		if !seen.add(k) {
			return nil, fmt.Errorf("a filter must not repeat %q", textcut.Prefix(k, 32))
		}
		if dec.PeekKind() == 'n' {
			if err := dec.SkipValue(); err != nil {
				return nil, errFilterObject
			}
			continue // as if absent
		}
		switch {
		case k == "ids":
			f.ids, err = readList(dec, k, "strings", tokenString)
		case k == "authors":
			f.authors, err = readList(dec, k, "strings", tokenString)
		case k == "kinds":
			f.kinds, err = readList(dec, k, "integers", tokenInt)
		case k == "since":
			f.hasSince = true
			f.since, err = readInt(dec, k)
		case k == "until":
			f.hasUntil = true
			f.until, err = readInt(dec, k)
		case k == "limit":
			f.hasLimit = true
			var n int64
			if n, err = readInt(dec, k); err == nil {
				if n < 0 {
					err = fmt.Errorf("limit must not be negative")
				}
				f.limit = int(min(n, int64(lim.maxLimit)))
			}
		case k == "search":
			return nil, closed("", "unsupported: search (NIP-50) is not supported")
		case len(k) > 1 && k[0] == '#':
			var values []string
			values, err = readList(dec, k, "strings", tokenString)
			f.tags = append(f.tags, tagFilter{name: k[1:], values: values})
		default:
			return nil, closed("", "unsupported: filter contains unknown element %q", textcut.Prefix(k, 32))
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, errFilterObject
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errFilterObject
	}
	return f.complete(lim)
}

func twoPassParseSubID(arr []jsontext.Value, label string, lim *limits) (string, error) {
	if len(arr) < 2 || arr[1].Kind() != '"' {
		return "", notice("invalid: %s needs a subscription id string", label)
	}
	id := unquote(arr[1])
	return id, checkSubID(id, label, lim)
}
