// Package llm is the built-in LLM worker's model client: an agent.Model
// that asks a server of the OpenAI-compatible chat-completions API, as
// Ollama, llama.cpp's llama-server, vLLM, LM Studio, LiteLLM and OpenAI
// serve it.
//
//	m, err := llm.New(llm.Config{
//		BaseURL: "http://127.0.0.1:11434/v1", // Ollama
//		Model:   "qwen3:8b",
//	})
//	if err != nil { … }
//	c, err := m.Complete(ctx, agent.Prompt{
//		Messages: []agent.ChatMessage{
//			{Role: agent.RoleSystem, Content: "Answer with one JSON object."},
//			{Role: agent.RoleUser, Content: "…"},
//		},
//		Schema: schema, // sent as a json_schema response_format
//	})
//	var me *agent.ModelError
//	if errors.As(err, &me) && me.Status == 429 { time.Sleep(me.RetryAfter) … }
//	n, err := m.ContextTokens(ctx) // the model's context length, 0 if unknown
//
// The answer is constrained to JSON with the request's response_format.
// By default (FormatAuto) a prompt's schema goes as json_schema; a server
// that refuses it with HTTP 400 is asked again with json_object, and the
// client keeps to json_object from then on.
//
// Complete honours its ctx, bounds every request by Config.Timeout and
// refuses a response body over Config.MaxResponseBytes (counted after a
// gzip encoding is undone) and, unless Config.HTTPClient is given,
// response headers over 64 KiB. An error answer
// of the server is an *agent.ModelError, with the status, Retry-After and
// whether the prompt was over the model's context (its Transient says
// whether asking again may help, its Advice what the operator should
// check; Check reports a refusal of GET /models the same way); an answer of a
// success status that is refused (no choice to take, a content that is
// not a string, a body that is not one JSON value or is too large, a body
// a deadline of ctx's or Config.Timeout cut, which still wraps
// context.DeadlineExceeded) is an
// *agent.AnsweredError, with the usage the server reported, for the
// runtime to count (an error object sent with a success status in place
// of the choices has its message in the error); other errors are transport failures. The client does
// not retry: the runtime does.
//
// A thinking model's reasoning, which the server sends apart from the
// content (llama-server's and vLLM's reasoning_content, Ollama's and
// newer vLLM's reasoning), is the Completion's Reasoning, whole (the
// runtime redacts it, then cuts it), and its ReasoningBytes the length
// sent (the longer of two), for the pricing of a call without usage; one that is not a string is left
// out. A <think> block at the start of the content stays in the content,
// for the runtime to set apart.
//
// The API key goes only into the Authorization header: it is in no log
// and no error (an error quoting the server's words has the key, should
// the server echo it, redacted, and is cut to 800 bytes). No redirect is
// followed. Unless Config.HTTPClient is given, the proxy of the
// environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) is used, as Go's
// http.ProxyFromEnvironment says, never for a loopback host.
package llm
