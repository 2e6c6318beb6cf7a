package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/config"
)

// ContextTokens returns the context length, in tokens, of the server's
// model, as ContextTokensFrom finds it, 0 when the server does not say.
func (c *Client) ContextTokens(ctx context.Context) (int, error) {
	n, _, err := c.ContextTokensFrom(ctx)
	return n, err
}

// ContextFrom says where ContextTokensFrom's figure comes from.
type ContextFrom int

const (
	// ContextFromNone: the server gives no context length (0).
	ContextFromNone ContextFrom = iota
	// ContextFromModelList: the model's entry of GET /models, as a
	// server that gives the context it runs with writes it.
	ContextFromModelList
	// ContextFromProps: llama-server's GET /props, the context each of
	// its slots runs with (its -c, shared by its --parallel slots).
	ContextFromProps
	// ContextFromTrained: llama.cpp's meta.n_ctx_train, the context the
	// model was trained with, which the server's -c may make smaller.
	ContextFromTrained
)

// ContextTokensFrom returns the model's context length in tokens, and
// where it comes from. The server's GET /models entry for the model
// gives it: vLLM's max_model_len, llama.cpp's meta.n_ctx, LM Studio's
// max_context_length, or a generic context_length or context_window.
// The entry is the one whose id is Config.Model, or the only entry of a
// one-model server such as llama-server, whose id is a file name or an
// alias. When the entry gives none of these (llama-server's gives only
// meta.n_ctx_train, the model's trained context; Ollama's nothing), the
// client asks GET /props at the server's root (the base URL without its
// /v1), where llama-server gives the context it runs with
// (default_generation_settings.n_ctx); a server without it (a 404), or
// an answer that cannot be read, leaves n_ctx_train, or nothing, with a
// debug line. It returns 0 and no error when the server does not say
// (or has no /models). What the client needs of the server's answers is
// kept, and shared with Check (see Client.modelList); a failure is not.
func (c *Client) ContextTokensFrom(ctx context.Context) (int, ContextFrom, error) {
	list, err := c.modelList(ctx)
	if errors.Is(err, ErrNoModelList) {
		return 0, ContextFromNone, nil
	}
	if err != nil {
		return 0, ContextFromNone, err
	}
	if list.served > 0 {
		return list.served, ContextFromProps, nil
	}
	if e := list.entry(); e != nil {
		n, from := e.contextTokens()
		return n, from, nil
	}
	return 0, ContextFromNone, nil
}

// modelsLook is one GET /models: its answer, once done is closed.
type modelsLook struct {
	done chan struct{}
	list *modelList
	err  error
	// canceled reports that the caller who asked gave up (its context
	// ended) before the answer: another caller asks again.
	canceled bool
}

// modelList returns the server's model list (with llama-server's
// /props, see lookAtServer), asked once: a caller that
// comes while a GET /models is in flight (Check and ContextTokens at
// start) waits for its answer, and an answer (a list, or ErrNoModelList)
// is kept for later callers. A failure is not kept: the next caller asks
// again.
func (c *Client) modelList(ctx context.Context) (*modelList, error) {
	for {
		c.lookMu.Lock()
		l := c.look
		if l == nil {
			l = &modelsLook{done: make(chan struct{})}
			c.look = l
			c.lookMu.Unlock()
			list, err := c.lookAtServer(ctx)
			err = c.scrub(err)
			c.lookMu.Lock()
			l.list, l.err, l.canceled = list, err, err != nil && ctx.Err() != nil
			if err != nil && !errors.Is(err, ErrNoModelList) {
				c.look = nil
			}
			close(l.done)
			c.lookMu.Unlock()
			return list, err
		}
		c.lookMu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("llm: %w", ctx.Err())
		}
		if !l.canceled {
			return l.list, l.err
		}
	}
}

// modelEntry is an entry of a /models list, with the context-length
// fields of the servers that give one. Numbers are float64 for servers
// that write 8192.0.
type modelEntry struct {
	ID          string  `json:"id"`
	MaxModelLen float64 `json:"max_model_len"` // vLLM
	Meta        struct {
		NCtx      float64 `json:"n_ctx"`
		NCtxTrain float64 `json:"n_ctx_train"`
	} `json:"meta"` // llama.cpp
	MaxContextLength float64 `json:"max_context_length"` // LM Studio
	ContextLength    float64 `json:"context_length"`
	ContextWindow    float64 `json:"context_window"`
}

// contextTokens is the context length the entry gives, and where it
// comes from: n_ctx_train last, the model's and not the server's. A
// figure under minServedContext is passed over as /props's is.
func (e *modelEntry) contextTokens() (int, ContextFrom) {
	for _, v := range []float64{e.MaxModelLen, e.Meta.NCtx, e.MaxContextLength, e.ContextLength, e.ContextWindow} {
		if n := windowSize(v); n >= minServedContext {
			return n, ContextFromModelList
		}
	}
	if n := windowSize(e.Meta.NCtxTrain); n >= minServedContext {
		return n, ContextFromTrained
	}
	return 0, ContextFromNone
}

// windowSize is v as a number of tokens, 0 when it is out of range.
func windowSize(v float64) int {
	if v >= 1 && v < 1<<31 {
		return int(v)
	}
	return 0
}

// modelList is what the client keeps of a /models list: not its
// entries, which a server can make as many as its answer's cap holds.
type modelList struct {
	n     int      // how many entries it has
	names []string // the ids of the first maxNamesShown, the key redacted, cut
	// first is the first entry, and named the one of Config.Model's id
	// (nil when none has it).
	first, named *modelEntry
	// served is the context llama-server's GET /props gives, 0 when it
	// was not asked or gave none.
	served int
}

// entry is the entry of the list that serves Config.Model: the one of
// that id, else the only one (a one-model server's, whose id is a file
// name or an alias); nil when there is none.
func (l *modelList) entry() *modelEntry {
	if l.named != nil {
		return l.named
	}
	if l.n == 1 {
		return l.first
	}
	return nil
}

// readModels reads a /models answer ({"data":[…]}): its entries one at a
// time, keeping what a modelList holds of them; redact is applied to
// each name kept before it is cut (a server may list the key it was
// sent, and a key across the cut would leave its first part).
func readModels(body []byte, model string, redact func(string) string) (*modelList, error) {
	var b struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	l := &modelList{}
	if len(b.Data) == 0 || string(b.Data) == "null" {
		return l, nil
	}
	// One decoder for all the entries: json.Unmarshal of each would
	// make a decoder's state per entry.
	d := json.NewDecoder(bytes.NewReader(b.Data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('[') {
		return nil, errors.New("its data is not an array")
	}
	var e modelEntry
	for d.More() {
		e = modelEntry{}
		if err := d.Decode(&e); err != nil {
			return nil, err
		}
		if l.n++; l.n == 1 {
			first := e
			l.first = &first
		}
		if l.named == nil && e.ID == model {
			named := e
			l.named = &named
		}
		if len(l.names) < maxNamesShown {
			l.names = append(l.names, cut(strings.ToValidUTF8(redact(e.ID), "\uFFFD"), maxNameShown))
		}
	}
	return l, nil
}

// lookAtServer is one look at the server: its GET /models list and,
// when the list's entry for the model gives no context the server runs
// with (only n_ctx_train, or nothing) and Config.ContextSet is not set,
// llama-server's GET /props. A
// /props that fails leaves the list as it is, with a debug line, unless
// the caller gave up (ctx ended): its look is then not kept.
func (c *Client) lookAtServer(ctx context.Context) (*modelList, error) {
	list, err := c.models(ctx)
	if err != nil {
		return nil, err
	}
	e := list.entry()
	if e == nil && list.n > 0 {
		return list, nil // the model is not listed: Check's error
	}
	if c.cfg.ContextSet {
		return list, nil // a context of /props would not be used
	}
	if e != nil {
		if _, from := e.contextTokens(); from == ContextFromModelList {
			return list, nil
		}
	}
	n, err := c.props(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		c.log.Debug("llm: the server's GET /props gives no context length (only llama-server has one); the model list's figure stands",
			"url", config.ShowURL(c.root+"/props"), "err", c.scrub(err))
	default:
		list.served = n
	}
	return list, nil
}

// errNoContext is props' error for an answer without a context length.
var errNoContext = errors.New("no default_generation_settings.n_ctx in its answer")

// propsTimeout bounds GET /props, which llama-server answers at once:
// one that does not answer must not use up the time its caller has for
// the model list's figure (the runtime's wait at start,
// agent.ContextWait).
const propsTimeout = 2 * time.Second

// props returns the context llama-server runs with, as its GET /props
// gives it (default_generation_settings.n_ctx: each slot's context),
// within the bounds of every request of the client (Config.Timeout,
// Config.MaxResponseBytes), in at most propsTimeout and half the time
// ctx has left.
func (c *Client) props(ctx context.Context) (int, error) {
	d := min(propsTimeout, c.cfg.Timeout)
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	body, err := c.get(pctx, c.root+"/props")
	if err != nil {
		return 0, err
	}
	var p struct {
		Settings struct {
			NCtx float64 `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return 0, fmt.Errorf("llm: reading GET /props: %w", err)
	}
	n := windowSize(p.Settings.NCtx)
	switch {
	case n == 0:
		return 0, fmt.Errorf("llm: GET /props: %w", errNoContext)
	case n < minServedContext:
		return 0, fmt.Errorf("llm: GET /props: a context of %d tokens, too small for an agent's prompt and answer", n)
	}
	return n, nil
}

// minServedContext is the smallest context, in tokens, taken from a
// model list or llama-server's GET /props: a smaller one (a broken
// server's n_ctx or max_model_len of 1)
// would cap the answers at a quarter of it, each cut short, and leave no
// room for a prompt.
const minServedContext = 1024

// get makes a GET request of url, with the API key, and returns the
// body of its 200 answer (read by the doer, within its cap, as one JSON
// value), else the failure: a *agent.ModelError for another status.
func (c *Client) get(ctx context.Context, url string) ([]byte, error) {
	cl := &call{}
	rctx, cancel := context.WithTimeout(withCall(ctx, cl), c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.doer.Do(req)
	if err != nil {
		return nil, c.failure(ctx, cl, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body) // in memory already: the doer read it
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.modelError(resp.StatusCode, resp.Header, bodyMessage(body), "")
	}
	return body, nil
}

// models returns the server's GET /models list, or ErrNoModelList when
// the server has none (404).
func (c *Client) models(ctx context.Context) (*modelList, error) {
	body, err := c.get(ctx, c.base+"/models")
	var me *agent.ModelError
	if errors.As(err, &me) && me.Status == http.StatusNotFound {
		return nil, ErrNoModelList
	}
	if err != nil {
		return nil, err
	}
	list, err := readModels(body, c.cfg.Model, c.redactKey)
	if err != nil {
		return nil, fmt.Errorf("llm: reading the model list: %w", err)
	}
	return list, nil
}

// ErrNoModelList is Check's error when the server has no GET /models
// (HTTP 404): some servers have none and work, but a base URL that names
// the wrong path has none either, and its completions fail with 404 too.
var ErrNoModelList = errors.New("the server has no model list (HTTP 404 for GET /models)")

// ErrModelNotListed is Check's error when the server lists several
// models and none is Config.Model (a name mistyped, or a model Ollama has
// not pulled).
var ErrModelNotListed = errors.New("the server lists no model of that name")

// maxNamesShown bounds the model names ErrModelNotListed's error gives,
// and maxNameShown each name, in bytes.
const (
	maxNamesShown = 10
	maxNameShown  = 100
)

// Check is a look at the server before any job needs it: GET /models
// answers, and lists Config.Model (or only one model, or none). It returns
// the failure of a server that cannot be reached or refuses (an
// *agent.ModelError for an HTTP status, as Complete's, whose Transient
// and Advice say whether a job's calls would be retried and what to
// check), ErrModelNotListed naming the first models the server lists, or
// ErrNoModelList for a server without /models, which may serve
// completions all the same. It shares the server's answer with
// ContextTokens (see modelList).
func (c *Client) Check(ctx context.Context) error {
	list, err := c.modelList(ctx)
	if errors.Is(err, ErrNoModelList) {
		return fmt.Errorf("llm: %w", err)
	}
	if err != nil {
		return err
	}
	if list.entry() == nil && list.n > 0 {
		names := make([]string, 0, len(list.names))
		for _, id := range list.names {
			names = append(names, strconv.Quote(id))
		}
		more := ""
		if list.n > len(list.names) {
			more = fmt.Sprintf(" and %d more", list.n-len(list.names))
		}
		return fmt.Errorf("llm: %w %q: it lists %s%s", ErrModelNotListed, c.cfg.Model, strings.Join(names, ", "), more)
	}
	return nil
}
