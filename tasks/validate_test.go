package tasks

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// TestValidateGo covers the validators on values built in Go, which have no
// JSON type errors but can break every other rule.
func TestValidateGo(t *testing.T) {
	str := func(s string) *string { return &s }
	rawMax := base64.StdEncoding.EncodeToString(make([]byte, MaxRawSize))
	rawOver := base64.StdEncoding.EncodeToString(make([]byte, MaxRawSize+1))
	okMsg := func() Message { return Message{MessageID: "m1", Role: RoleUser, Parts: []Part{TextPart("x")}} }
	okArt := func() Artifact { return Artifact{ArtifactID: "a1", Name: "out.txt", Parts: []Part{TextPart("x")}} }
	cases := []struct {
		name       string
		err        error
		field      string
		constraint string
	}{
		{"message ok", func() error { m := okMsg(); return m.Validate() }(), "", ""},
		{"message role", func() error { m := okMsg(); m.Role = "bot"; return m.Validate() }(), "message.role", "enum"},
		{"message no parts", func() error { m := okMsg(); m.Parts = nil; return m.Validate() }(), "message.parts", "minItems"},
		{"message id", func() error { m := okMsg(); m.MessageID = ""; return m.Validate() }(), "message.messageId", "minLength"},
		{"artifact ok", func() error { a := okArt(); return a.Validate() }(), "", ""},
		{"artifact no name ok", func() error { a := okArt(); a.Name = ""; return a.Validate() }(), "", ""},
		{"artifact name 256", func() error { a := okArt(); a.Name = strings.Repeat("é", 256); return a.Validate() }(), "", ""},
		{"artifact name 257", func() error { a := okArt(); a.Name = strings.Repeat("é", 257); return a.Validate() }(), "artifact.name", "maxLength"},
		{"artifact name UTF-8", func() error { a := okArt(); a.Name = "\xff"; return a.Validate() }(), "artifact.name", "format"},
		{"artifact id", func() error { a := okArt(); a.ArtifactID = "a b"; return a.Validate() }(), "artifact.artifactId", "pattern"},
		{"artifact 100 parts", func() error { a := okArt(); a.Parts = make([]Part, 100); fill(a.Parts); return a.Validate() }(), "", ""},
		{"artifact 101 parts", func() error { a := okArt(); a.Parts = make([]Part, 101); fill(a.Parts); return a.Validate() }(), "artifact.parts", "maxItems"},
		{"artifact no parts", func() error { a := okArt(); a.Parts = []Part{}; return a.Validate() }(), "artifact.parts", "minItems"},
		{"artifact bad part", func() error { a := okArt(); a.Parts = append(a.Parts, Part{}); return a.Validate() }(), "artifact.parts[1]", "oneOf"},
		{"artifact media type with parameters", func() error {
			a := okArt()
			a.Parts = append(a.Parts, Part{Text: str("x"), MediaType: "text/plain; charset=utf-8"}, RawPart("aGk=", "text/x-diff; charset=utf-8"))
			return a.Validate()
		}(), "", ""},
		{"artifact media type bad parameter", func() error {
			a := okArt()
			a.Parts = append(a.Parts, Part{Text: str("x"), MediaType: "text/plain; charset=utf-8; charset=latin1"})
			return a.Validate()
		}(), "artifact.parts[1].mediaType", "format"},
		{"part text UTF-8", func() error { p := Part{Text: str("\xff")}; return p.Validate() }(), "part.text", "format"},
		{"part data array", func() error { p := DataPart([]byte(`[]`)); return p.Validate() }(), "part.data", "type"},
		{"part data invalid", func() error { p := DataPart([]byte(`{"a":}`)); return p.Validate() }(), "part.data", "type"},
		{"part data empty", func() error { p := DataPart([]byte{}); return p.Validate() }(), "part.data", "type"},
		{"part raw no media", func() error { p := RawPart("aGk=", ""); return p.Validate() }(), "part.mediaType", "required"},
		{"part url", func() error { p := URLPart("nope"); return p.Validate() }(), "part.url", "format"},
		{"part url scheme only", func() error { p := URLPart("https:"); return p.Validate() }(), "part.url", "format"},
		// Sizes beyond what a 1 MB payload can carry, checked on values.
		{"raw 10 MB", func() error { p := RawPart(rawMax, "image/png"); return p.Validate() }(), "", ""},
		{"raw 10 MB unpadded", func() error { p := RawPart(strings.TrimRight(rawMax, "="), "image/png"); return p.Validate() }(), "", ""},
		{"raw over 10 MB decoded", func() error { p := RawPart(rawOver, "a/b"); return p.Validate() }(), "part.raw", "maxSize"},
		{"raw over schema length", func() error { p := RawPart(strings.Repeat("A", MaxRawLength+4), "a/b"); return p.Validate() }(), "part.raw", "maxLength"},
		{"text 10 MB", func() error { p := TextPart(strings.Repeat("é", MaxTextSize/2)); return p.Validate() }(), "", ""},
		{"text over 10 MB", func() error { p := TextPart(strings.Repeat("é", MaxTextSize/2) + "a"); return p.Validate() }(), "part.text", "maxLength"},
		{"data over 1 MB", func() error {
			p := DataPart([]byte(`{"k":"` + strings.Repeat("a", MaxDataSize) + `"}`))
			return p.Validate()
		}(), "part.data", "maxSize"},
		{"data 1 MB with spaces", func() error {
			p := DataPart([]byte(`{ "k" : "` + strings.Repeat("a", MaxDataSize-8) + `" }`))
			return p.Validate()
		}(), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.field == "" {
				if c.err != nil {
					t.Fatalf("rejected: %v", c.err)
				}
				return
			}
			var se *snap.Error
			if !errors.As(c.err, &se) || se.Code != snap.CodeInvalidPayload || se.Field() != c.field || se.Data["constraint"] != c.constraint {
				t.Fatalf("err = %v, want 1004 %s %s", c.err, c.field, c.constraint)
			}
		})
	}
}

func fill(ps []Part) {
	for i := range ps {
		ps[i] = TextPart(fmt.Sprint(i))
	}
}
