package llm

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-3", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999", maxRetryAfter},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(72 * time.Hour).Format(http.TimeFormat), maxRetryAfter},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("a", 300), strings.Repeat("a", 301), strings.Repeat("é", 200), strings.Repeat("😀", 100)} {
		got := cut(s, 300)
		if len(got) > 300 || !utf8.ValidString(got) || (len(s) <= 300 && got != s) || !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
			t.Errorf("cut(%d bytes) = %d bytes %q", len(s), len(got), got)
		}
	}
}

func TestIsContextLength(t *testing.T) {
	for _, s := range []string{
		"This model's maximum context length is 8192 tokens",
		"invalid_request_error context_length_exceeded",
		"the request exceeds the available context size, try increasing it",
		"input is too long: too many tokens",
		"prompt is longer than the model's context length",
	} {
		if !isContextLength(s) {
			t.Errorf("isContextLength(%q) = false", s)
		}
	}
	for _, s := range []string{"rate limited", "model not found", "invalid response_format"} {
		if isContextLength(s) {
			t.Errorf("isContextLength(%q) = true", s)
		}
	}
}
