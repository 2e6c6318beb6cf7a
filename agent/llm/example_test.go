package llm_test

import (
	"context"
	"fmt"
	"log"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
)

func Example() {
	srv := llmtest.Start(llmtest.WithModel("qwen3", 8192)) // stands for Ollama, vLLM, …
	defer srv.Close()
	srv.Push(llmtest.Text(`{"answer":"4"}`))

	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "qwen3"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	c, err := m.Complete(ctx, agent.Prompt{
		Messages: []agent.ChatMessage{
			{Role: agent.RoleSystem, Content: `Answer with one JSON object {"answer":…}.`},
			{Role: agent.RoleUser, Content: "2+2?"},
		},
		Schema: []byte(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Text)
	n, err := m.ContextTokens(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "tokens of context")
	// Output:
	// {"answer":"4"}
	// 8192 tokens of context
}
