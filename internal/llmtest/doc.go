// Package llmtest is a scripted OpenAI-compatible chat-completions server
// for tests. It listens on a real socket (httptest.NewServer), answers
// POST /v1/chat/completions from a script of replies, serves GET
// /v1/models, and records every request it gets.
//
//	srv := llmtest.New(t, llmtest.WithModel("qwen3", 8192))
//	srv.Push(
//		llmtest.Text(`{"op":"read"}`),
//		llmtest.Reply{Status: 429, Message: "slow down", Header: http.Header{"Retry-After": {"7"}}},
//	)
//	srv.SetHandler(func(r llmtest.Request) llmtest.Reply { // once the script is used up
//		return llmtest.JSON(map[string]string{"answer": r.Messages[len(r.Messages)-1].Content})
//	})
//	client, _ := llm.New(llm.Config{BaseURL: srv.URL(), Model: "qwen3"})
//	…
//	if err := srv.WaitCalls(ctx, 2); err != nil { … }
//	last := srv.Requests()[1]
//
// Replies are taken first from the script (a FIFO filled by Push), then
// from the handler set by SetHandler; with neither, the server answers
// HTTP 500 {"error":{"message":"llmtest: script exhausted"}}.
//
// A Server is safe for concurrent use. New closes it in the test's
// Cleanup; Start, for examples and TestMain, leaves that to the caller.
package llmtest
