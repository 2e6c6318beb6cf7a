package embedded

import (
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/jsondec"
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
//
// One pass reads the message: each element is decoded as it is read, and
// what a refusal leaves unread is read still, since a message that is not
// valid JSON anywhere is refused as such before anything in it is.
func parseClientMessage(b []byte, lim *limits) (*clientMessage, error) {
	if len(b) > lim.maxMessageLength {
		return nil, notice("invalid: message too large (%d > %d bytes)", len(b), lim.maxMessageLength)
	}
	pooled := jsondec.Get(b)
	defer jsondec.Put(pooled)
	dec := &pooled.Decoder
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, unparsable(b, lim, "not a JSON array")
	}
	msg, refused := readClientMessage(dec, lim)
	// The rest of the array, whatever was refused, then nothing after it.
	for dec.StackDepth() > 1 {
		if _, err := dec.ReadToken(); err != nil {
			return nil, unparsable(b, lim, "not a JSON array of valid JSON (I-JSON: no repeated member names, no invalid UTF-8 or lone surrogates)")
		}
	}
	for dec.StackDepth() == 1 && dec.PeekKind() != ']' {
		if _, err := dec.ReadValue(); err != nil {
			return nil, unparsable(b, lim, "not a JSON array of valid JSON (I-JSON: no repeated member names, no invalid UTF-8 or lone surrogates)")
		}
	}
	if dec.StackDepth() == 1 {
		if _, err := dec.ReadToken(); err != nil {
			return nil, unparsable(b, lim, "not a JSON array")
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, unparsable(b, lim, "data after the array")
	}
	if refused != nil {
		return nil, refused
	}
	return msg, nil
}

// readClientMessage reads the elements of a client message, after its
// '[', as far as it needs to: on a refusal it stops where it is, and the
// caller reads the rest.
func readClientMessage(dec *jsontext.Decoder, lim *limits) (*clientMessage, *refusal) {
	if dec.PeekKind() == ']' {
		return nil, notice("invalid: empty message")
	}
	if dec.PeekKind() != '"' {
		return nil, notice("invalid: the first element must be the message type")
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, notice("invalid: the first element must be the message type") // the caller finds why
	}
	switch label := tok.String(); label {
	case "EVENT":
		if dec.PeekKind() == ']' {
			return nil, notice("invalid: EVENT without an event")
		}
		ev, id, err := readEvent(dec, lim)
		if err != nil {
			return nil, okFalse(id, "invalid: %s", reason(err))
		}
		if dec.PeekKind() != ']' {
			return nil, okFalse(id, "invalid: EVENT has more than one element after its type")
		}
		return &clientMessage{typ: msgEvent, event: ev}, nil
	case "REQ":
		subID, r := readSubID(dec, label, lim)
		if r != nil {
			return nil, r
		}
		// Each filter is decoded as it comes, up to the bound; past it,
		// or after a refused one, the count still decides the answer.
		var filters []*filter
		var refused *refusal
		n := 0
		for ; dec.PeekKind() != ']'; n++ {
			if refused != nil || n >= lim.maxFilters {
				if _, err := dec.ReadValue(); err != nil {
					return nil, notice("") // the caller finds why
				}
				continue
			}
			f, err := readFilter(dec, lim, false)
			if err != nil {
				refused = filterRefusal(subID, err)
				for dec.StackDepth() > 1 { // the rest of the filter
					if _, err := dec.ReadToken(); err != nil {
						return nil, refused // the caller finds why
					}
				}
				continue
			}
			if filters == nil {
				filters = make([]*filter, 0, 1)
			}
			filters = append(filters, f)
		}
		switch {
		case n == 0:
			return nil, closed(subID, "invalid: REQ needs at least one filter")
		case n > lim.maxFilters:
			return nil, closed(subID, "invalid: too many filters (%d > %d)", n, lim.maxFilters)
		case refused != nil:
			return nil, refused
		}
		return &clientMessage{typ: msgReq, subID: subID, filters: filters}, nil
	case "CLOSE":
		subID, r := readSubID(dec, label, lim)
		if r != nil {
			return nil, r
		}
		if dec.PeekKind() != ']' {
			return nil, notice("invalid: CLOSE takes only a subscription id")
		}
		return &clientMessage{typ: msgClose, subID: subID}, nil
	case "COUNT":
		subID, r := readSubID(dec, label, lim)
		if r != nil {
			return nil, r
		}
		return nil, closed(subID, "unsupported: COUNT (NIP-45) is not supported")
	default:
		return nil, notice("unsupported: unknown message type %q", textcut.Prefix(label, 32))
	}
}

// unparsable refuses b, which is not a JSON array the relay reads, for
// why: with the OK false its publisher waits for when it is an EVENT
// whose id can be found, the CLOSED of a REQ whose subscription id can,
// else with a NOTICE (see wholeRefusal).
func unparsable(b []byte, lim *limits, why string) *refusal {
	return wholeRefusal(b, nil, lim, "invalid: could not parse message: "+why)
}

// filterRefusal is the answer to a REQ with a filter refused with err.
func filterRefusal(subID string, err error) *refusal {
	if r, ok := err.(*refusal); ok {
		r.reply, r.ref = replyClosed, subID
		return r
	}
	return closed(subID, "invalid: %v", err)
}

// readSubID reads the subscription id of a REQ, CLOSE or COUNT.
func readSubID(dec *jsontext.Decoder, label string, lim *limits) (string, *refusal) {
	if dec.PeekKind() != '"' {
		return "", notice("invalid: %s needs a subscription id string", label)
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return "", notice("") // the caller finds why
	}
	id := tok.String()
	if err := checkSubID(id, label, lim); err != nil {
		return "", err.(*refusal)
	}
	return id, nil
}

// checkSubID checks the subscription id of a REQ, CLOSE or COUNT.
//
// NIP-01 bounds an id at 64 "chars"; the bound counts characters
// (Unicode code points), not bytes: an id of 64 "é" is 128 bytes, one of
// 64 emoji 256. Whatever a client counts — bytes, UTF-16 units (as
// JavaScript does), code points — an id within 64 of them is within 64
// code points. An id therefore takes at most utf8.UTFMax bytes a
// character (see maxEchoedRef).
//
// NIP-01 has CLOSED only for a REQ the relay refuses (and a subscription
// it ends): a CLOSE, which has no answer, is refused with a NOTICE, since
// an id the relay cannot hold names no subscription of the connection.
func checkSubID(id, label string, lim *limits) error {
	switch {
	case id == "" && label == "CLOSE":
		return notice("invalid: CLOSE subscription id must not be empty")
	case id == "":
		// NIP-01: a REQ the relay refuses gets CLOSED, which a client
		// waiting on its subscription reads, not a NOTICE; the id it
		// refers to is the one the REQ gave, "".
		return closed("", "invalid: subscription id must not be empty")
	case len(id) > lim.maxSubIDLength: // fewer bytes: fewer characters
		n := utf8.RuneCountInString(id)
		switch {
		case n <= lim.maxSubIDLength:
		case label == "CLOSE":
			return notice("invalid: CLOSE subscription id too long (%d > %d characters)", n, lim.maxSubIDLength)
		default:
			return closed(id, "invalid: subscription id too long (%d > %d characters)", n, lim.maxSubIDLength)
		}
	}
	return nil
}

// eventFields are the members every event must have.
var eventFields = [...]string{"id", "pubkey", "created_at", "kind", "tags", "content", "sig"}

// parseEvent decodes an event object and checks its shape and limits (not
// its id or signature: see verify). It returns the id it found, when it is
// a string, even on error, for the OK answer.
func parseEvent(raw jsontext.Value, lim *limits) (*nostr.Event, string, error) {
	pooled := jsondec.Get(raw)
	defer jsondec.Put(pooled)
	return readEvent(&pooled.Decoder, lim)
}

// readEvent is parseEvent of the next value of dec.
func readEvent(dec *jsontext.Decoder, lim *limits) (*nostr.Event, string, error) {
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

// readTags reads an array of arrays of strings; nulls are refused.
func readTags(dec *jsontext.Decoder) (nostr.Tags, error) {
	errShape := fmt.Errorf("field %q must be an array of arrays of strings", "tags")
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, errShape
	}
	tags := nostr.Tags{}
	for dec.PeekKind() != ']' {
		switch dec.PeekKind() {
		case 'n':
			return nil, fmt.Errorf("a tag must be an array of strings, not null")
		case '[':
		default:
			return nil, errShape
		}
		dec.ReadToken()
		tag := nostr.Tag{}
		for dec.PeekKind() != ']' {
			tok, err := dec.ReadToken()
			switch {
			case err != nil:
				return nil, errShape
			case tok.Kind() == 'n':
				return nil, fmt.Errorf("tag elements must be strings, not null")
			case tok.Kind() != '"':
				return nil, errShape
			}
			tag = append(tag, tok.String())
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, errShape
		}
		tags = append(tags, tag)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, errShape
	}
	return tags, nil
}

// jsonReason is a decoding error's text without the package prefix.
func jsonReason(err error) string {
	return strings.TrimPrefix(err.Error(), "jsontext: ")
}

// unquote returns the string a JSON string value holds; the value was
// validated by the decoder that produced it.
func unquote(v jsontext.Value) string {
	b, _ := jsontext.AppendUnquote(nil, v)
	return string(b)
}

// parseFilter decodes one REQ filter in one pass. A null member counts
// as absent; null list elements are refused.
func parseFilter(raw []byte, lim *limits) (*filter, error) {
	// Duplicate names are refused by readFilter, for less than the
	// decoder's general check costs.
	pooled := jsondec.Get(raw, jsontext.AllowDuplicateNames(true))
	defer jsondec.Put(pooled)
	dec := &pooled.Decoder
	f, err := readFilter(dec, lim, true)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errFilterObject
	}
	return f, nil
}

// readFilter is parseFilter of the next value of dec; checkNames refuses
// a repeated member, which a decoder that does not allow them (the
// message's own) has refused already.
func readFilter(dec *jsontext.Decoder, lim *limits, checkNames bool) (*filter, error) {
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
		if checkNames && !seen.add(k) {
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
	return f.complete(lim)
}

var errFilterObject = errors.New("a filter must be a JSON object")

// names is a set of member names: a slice while small (a filter has a
// handful), a map once larger, so that a filter of many tag names costs
// linear time.
type names struct {
	few  []string
	many map[string]struct{}
}

// add adds k and reports whether it was new.
func (n *names) add(k string) bool {
	if n.many != nil {
		if _, dup := n.many[k]; dup {
			return false
		}
		n.many[k] = struct{}{}
		return true
	}
	if slices.Contains(n.few, k) {
		return false
	}
	n.few = append(n.few, k)
	if len(n.few) > 16 {
		n.many = make(map[string]struct{}, 2*len(n.few))
		for _, s := range n.few {
			n.many[s] = struct{}{}
		}
		n.few = nil
	}
	return true
}

// readList reads a JSON array whose elements conv accepts (never nil
// afterwards); anything else, null elements included, is refused.
func readList[T any](dec *jsontext.Decoder, key, what string, conv func(jsontext.Token) (T, bool)) ([]T, error) {
	bad := func() error { return fmt.Errorf("%q must be an array of %s", textcut.Prefix(key, 32), what) }
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, bad()
	}
	out := []T{}
	for dec.PeekKind() != ']' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, bad()
		}
		v, ok := conv(tok)
		if !ok {
			return nil, bad()
		}
		out = append(out, v)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, bad()
	}
	return out, nil
}

func tokenString(tok jsontext.Token) (string, bool) {
	return tok.String(), tok.Kind() == '"'
}

func tokenInt(tok jsontext.Token) (int, bool) {
	n, ok := tokenInt64(tok)
	return int(n), ok
}

// tokenInt64 accepts a JSON number whose value is an integer in int64's
// range, however it is written (see jsonInt).
func tokenInt64(tok jsontext.Token) (int64, bool) {
	if tok.Kind() != '0' {
		return 0, false
	}
	n, whole, inRange := jsonInt(tok.String())
	return n, whole && inRange
}

// readInt reads a filter's integer member key (since, until, limit).
func readInt(dec *jsontext.Decoder, key string) (int64, error) {
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '0' {
		return 0, fmt.Errorf("%q must be an integer", key)
	}
	s := tok.String()
	n, whole, inRange := jsonInt(s)
	// Echoed as a copy, so that s does not escape: the common number,
	// short and plain, then takes no allocation.
	switch {
	case !whole:
		return 0, fmt.Errorf("%q must be an integer, not %s", key, strings.Clone(textcut.Prefix(s, 32)))
	case !inRange:
		return 0, fmt.Errorf("%q is out of range (%s)", key, strings.Clone(textcut.Prefix(s, 32)))
	}
	return n, nil
}

// jsonInt reads s, a JSON number as the decoder validated it, as an
// int64. JSON has one number type: 1e3, 1000.0 and 10000e-1 are the
// integer 1000 as much as 1000 is (Python's json writes a float 1000 as
// 1000.0; go-nostr's filter decoder, like encoding/json's for an int64,
// takes only the plain form), so any form whose value is a whole number
// is taken, exactly, with no rounding through float64. whole is false
// for a value with a fraction (1.5, 1.000000000000000000001e3); inRange
// is false for a whole value beyond int64 (1e19). A short plain form
// costs one strconv.ParseInt, and no form allocates.
func jsonInt(s string) (n int64, whole, inRange bool) {
	if len(s) <= 18 && !strings.ContainsAny(s, ".eE") {
		n, _ := strconv.ParseInt(s, 10, 64) // 18 characters fit
		return n, true, true
	}
	neg := s != "" && s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], exponent(s[i+1:])
	}
	hi, lo := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		hi, lo = mant[:i], mant[i+1:]
	}
	// The value is the digits of hi and lo, one after the other, times
	// 10^e; without their leading and trailing zeros (each trailing one
	// dropped raises e), it is a whole number when e ≥ 0.
	e := exp - int64(len(lo))
	hi = strings.TrimLeft(hi, "0")
	if hi == "" {
		lo = strings.TrimLeft(lo, "0")
	}
	t := strings.TrimRight(lo, "0")
	e += int64(len(lo) - len(t))
	lo = t
	if lo == "" {
		t := strings.TrimRight(hi, "0")
		e += int64(len(hi) - len(t))
		hi = t
	}
	digits := int64(len(hi) + len(lo))
	switch {
	case digits == 0:
		return 0, true, true
	case e < 0:
		return 0, false, true
	case digits+e > 19: // at least 10^19, past int64
		return 0, true, false
	}
	var u uint64 // below 10^19 < 2^64
	for _, part := range [2]string{hi, lo} {
		for i := range len(part) {
			u = u*10 + uint64(part[i]-'0')
		}
	}
	for range e {
		u *= 10
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true, true
	case neg && u <= 1<<63:
		return int64(-u), true, true
	}
	return 0, true, false
}

// exponent reads the exponent of a JSON number (digits, maybe signed),
// saturated far beyond any that a message can make matter.
func exponent(s string) int64 {
	const most = 1 << 40
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	var n int64
	for i := range len(s) {
		if n = n*10 + int64(s[i]-'0'); n > most {
			n = most
			break
		}
	}
	if neg {
		return -n
	}
	return n
}
