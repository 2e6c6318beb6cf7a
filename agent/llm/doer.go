package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
	openai "github.com/sashabaranov/go-openai"
)

// ErrResponseTooLarge reports a response body over Config.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("llm: response body too large")

// ErrMalformedResponse reports a success response whose body is not
// exactly one JSON value with unique member names and valid UTF-8: two
// objects, trailing data, a stream nobody asked for. go-openai's decoder
// would read the first object and ignore the rest, take the last of two
// duplicate names, and replace invalid UTF-8, each a second reading of
// what the server sent.
var ErrMalformedResponse = errors.New("llm: malformed response body")

// call is the per-request holder through which the doer passes what
// go-openai does not expose: the response's status and headers. It also
// carries what the doer must add to the request. A call serves one HTTP
// request; it is written by doer.Do and read after Do has returned, in
// the same goroutine.
type call struct {
	// zeroTemperature asks for "temperature":0 in the body: go-openai
	// omits a zero temperature, and servers take that as their default
	// (0.8 or 1), not as greedy decoding.
	zeroTemperature bool
	// answer asks the doer to keep a success body in body, checked by
	// checkBody, and to hand go-openai an empty object in its place: the
	// client reads the answer itself (see readAnswer).
	answer bool

	status int
	header http.Header
	body   []byte
	// errBody is the body of an error status (400 and over), within the
	// cap: llama-server's refusal of a prompt too long gives its context
	// there, which go-openai's error does not keep.
	errBody []byte
	// size is the length of a success body, read or not (the cap when
	// it was over it): what the server sent, for the estimate of a
	// refused answer's cost.
	size int
}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// doer is the openai.HTTPDoer under go-openai: it records the status and
// headers of the answer in the request's call, and reads the answer's
// body in full, refusing one larger than max bytes, so that no caller
// ever sees part of a larger answer.
type doer struct {
	next openai.HTTPDoer
	max  int64
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	c, _ := req.Context().Value(callKey{}).(*call)
	if c != nil && c.zeroTemperature {
		var err error
		if req, err = withZeroTemperature(req); err != nil {
			return nil, err
		}
	}
	resp, err := d.next.Do(req)
	if err != nil {
		return nil, err
	}
	if c != nil {
		c.status, c.header = resp.StatusCode, resp.Header
	}
	body, err := readCapped(resp, d.max)
	resp.Body.Close()
	success := resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusMultipleChoices
	if c != nil && success {
		// What the server sent, whole or as far as it came before the
		// read failed (a time-out cut it).
		c.size = min(len(body), int(d.max))
		if errors.Is(err, ErrResponseTooLarge) {
			c.size = int(d.max)
		}
	}
	if err != nil {
		return nil, err
	}
	if c != nil && resp.StatusCode >= http.StatusBadRequest {
		c.errBody = body
	}
	switch {
	case success:
		if err := checkBody(resp.Header.Get("Content-Type"), body); err != nil {
			return nil, err
		}
		if c != nil && c.answer {
			c.body, body = body, []byte("{}")
		}
	case resp.StatusCode < http.StatusBadRequest:
		// go-openai reads every status under 400 as a success; a 3xx
		// that reaches here (one without a Location, which Go's client
		// returns as it is) is no completion.
		return nil, fmt.Errorf("%w: the server answered HTTP %d, not a completion (redirects are not followed)", ErrMalformedResponse, resp.StatusCode)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// checkBody refuses a success body that is not exactly one JSON value
// (RFC 7493: unique member names, valid UTF-8), white space aside.
func checkBody(contentType string, body []byte) error {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "text/event-stream" {
		return fmt.Errorf("%w: the server streamed its answer (text/event-stream), which was not asked for", ErrMalformedResponse)
	}
	d := jsontext.NewDecoder(bytes.NewReader(body))
	// The names of each open object, folded: encoding/json, under
	// go-openai, matches names without regard to case and takes the last
	// of "content" and "Content". An object's map is made at its first
	// name, so that "[{},{},…]" makes none.
	var names []map[string]struct{}
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrMalformedResponse, err)
		}
		switch tok.Kind() {
		case '{':
			names = append(names, nil)
		case '}':
			names = names[:len(names)-1]
		case '"':
			if k, n := d.StackIndex(d.StackDepth()); k == '{' && n%2 == 1 {
				name, open := foldName(tok.String()), &names[len(names)-1]
				if _, dup := (*open)[name]; dup {
					return fmt.Errorf("%w: duplicate object member name %q (names differ only in case)", ErrMalformedResponse, tok.String())
				}
				if *open == nil {
					*open = map[string]struct{}{}
				}
				(*open)[name] = struct{}{}
			}
		}
		if d.StackDepth() == 0 {
			break
		}
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON value", ErrMalformedResponse)
	}
	return nil
}

// foldName is name with each letter replaced by the least of its case
// folds: two names fold alike when encoding/json would match one to the
// other (bytes.EqualFold).
func foldName(name string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, name)
}

// noRedirect refuses a redirect: the request (the prompt, the API key)
// goes to BaseURL and nowhere else. Go would follow one to another port or
// scheme of the same host with the Authorization header, and a 307 or 308
// to any host with the prompt.
func noRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("llm: the model server redirected to %s; redirects are not followed (set the base URL to where the server answers)", req.URL.Redacted())
}

// readCapped reads resp's body, failing if it holds more than max bytes.
// A read that fails returns the bytes read before it with its error.
func readCapped(resp *http.Response, max int64) ([]byte, error) {
	if resp.ContentLength > max {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrResponseTooLarge, resp.ContentLength, max)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return body, fmt.Errorf("reading response body: %w", err)
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrResponseTooLarge, max)
	}
	return body, nil
}

// withZeroTemperature returns a copy of req whose JSON object body starts
// with "temperature":0. The body is go-openai's marshaling of a request
// whose zero temperature it left out.
func withZeroTemperature(req *http.Request) (*http.Request, error) {
	if req.Body == nil {
		return req, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if len(b) > 2 && b[0] == '{' && b[1] != '}' {
		b = append([]byte(`{"temperature":0,`), b[1:]...)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return r, nil
}
