package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// ContextTokens returns the model's context length in tokens, as the
// server's GET /models entry for the model gives it: vLLM's
// max_model_len, llama.cpp's meta.n_ctx (else meta.n_ctx_train), LM
// Studio's max_context_length, or a generic context_length or
// context_window. The entry is the one whose id is Config.Model, or the
// only entry of a one-model server such as llama-server, whose id is a
// file name or an alias. It returns 0 and no error when the server does
// not say (or has no /models). A result is cached; an error is not.
func (c *Client) ContextTokens(ctx context.Context) (int, error) {
	c.ctxMu.Lock()
	if c.ctxKnown {
		n := c.ctxTokens
		c.ctxMu.Unlock()
		return n, nil
	}
	c.ctxMu.Unlock()

	n, err := c.fetchContextTokens(ctx)
	if err != nil {
		return 0, err
	}
	c.ctxMu.Lock()
	c.ctxKnown, c.ctxTokens = true, n
	c.ctxMu.Unlock()
	return n, nil
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

func (e *modelEntry) contextTokens() int {
	for _, v := range []float64{e.MaxModelLen, e.Meta.NCtx, e.Meta.NCtxTrain, e.MaxContextLength, e.ContextLength, e.ContextWindow} {
		if v >= 1 && v < 1<<31 {
			return int(v)
		}
	}
	return 0
}

func (c *Client) fetchContextTokens(ctx context.Context) (int, error) {
	cl := &call{}
	rctx, cancel := context.WithTimeout(withCall(ctx, cl), c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.base+"/models", nil)
	if err != nil {
		return 0, fmt.Errorf("llm: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.doer.Do(req)
	if err != nil {
		return 0, c.failure(ctx, cl, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body) // in memory already: the doer read it
	if err != nil {
		return 0, fmt.Errorf("llm: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, nil
	case resp.StatusCode != http.StatusOK:
		return 0, c.modelError(resp.StatusCode, resp.Header, bodyMessage(body), "")
	}
	var list struct {
		Data []modelEntry `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, fmt.Errorf("llm: reading the model list: %w", err)
	}
	for i := range list.Data {
		if list.Data[i].ID == c.cfg.Model {
			return list.Data[i].contextTokens(), nil
		}
	}
	if len(list.Data) == 1 {
		return list.Data[0].contextTokens(), nil
	}
	return 0, nil
}
