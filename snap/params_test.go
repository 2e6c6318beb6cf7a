package snap_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// send builds a message/send payload whose parts are partsJSON.
func send(partsJSON string) string {
	return `{"message":{"messageId":"m1","role":"user","parts":[` + partsJSON + `]}}`
}

// sendMsg builds a message/send payload with the given message members.
func sendMsg(members string) string { return `{"message":{` + members + `}}` }

func quote(s string) string { return `"` + s + `"` }

func repeatParts(n int) string {
	return strings.TrimSuffix(strings.Repeat(`{"text":"x"},`, n), ",")
}

type payloadCase struct {
	name       string
	payload    string
	field      string // "" when the payload is valid
	constraint string
}

// checkCase runs one case through parse and asserts the outcome.
func checkCase(t *testing.T, c payloadCase, parse func([]byte) error) {
	t.Helper()
	err := parse([]byte(c.payload))
	if c.field == "" {
		if err != nil {
			t.Fatalf("valid payload rejected: %v", err)
		}
		return
	}
	var se *snap.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want *snap.Error", err, err)
	}
	if se.Code != snap.CodeInvalidPayload {
		t.Fatalf("code = %d, want 1004 (%v)", se.Code, se)
	}
	if se.Field() != c.field || se.Data["constraint"] != c.constraint {
		t.Fatalf("field %q constraint %v, want %q %q (%v)", se.Field(), se.Data["constraint"], c.field, c.constraint, se)
	}
	for _, k := range []string{"field", "constraint", "expected", "received"} {
		if _, ok := se.Data[k]; !ok {
			t.Fatalf("data lacks %q: %v", k, se.Data)
		}
	}
}

func TestParseSendParams(t *testing.T) {
	id128 := strings.Repeat("a", 128)
	id129 := strings.Repeat("a", 129)
	text10MB := strings.Repeat("a", snap.MaxTextSize)
	// 1 MB of compact data: {"k":"aaa…"} is 8 bytes plus the string.
	data1MB := `{"k":"` + strings.Repeat("a", snap.MaxDataSize-8) + `"}`
	url2048 := "https://example.com/" + strings.Repeat("a", 2048-20)
	mt128 := "application/" + strings.Repeat("a", 128-12)

	cases := []payloadCase{
		// Valid.
		{"text", send(`{"text":"hello"}`), "", ""},
		{"empty text", send(`{"text":""}`), "", ""},
		{"text with media type", send(`{"text":"# hi","mediaType":"text/markdown"}`), "", ""},
		{"role agent", sendMsg(`"messageId":"m1","role":"agent","parts":[{"text":"x"}]`), "", ""},
		{"raw padded", send(`{"raw":"aGk=","mediaType":"application/octet-stream"}`), "", ""},
		{"raw unpadded", send(`{"raw":"aGk","mediaType":"application/octet-stream"}`), "", ""},
		{"raw empty", send(`{"raw":"","mediaType":"application/octet-stream"}`), "", ""},
		{"url https", send(`{"url":"https://example.com/a?b=c#d"}`), "", ""},
		{"url urn", send(`{"url":"urn:isbn:0451450523"}`), "", ""},
		{"url 2048", send(`{"url":"` + url2048 + `"}`), "", ""},
		{"data", send(`{"data":{"schema_version":"1.0.0","action":"read_file"},"mediaType":"application/json"}`), "", ""},
		{"data empty object", send(`{"data":{}}`), "", ""},
		{"data 1 MB", send(`{"data":` + data1MB + `}`), "", ""},
		{"data 1 MB compact, spaced out", send(`{"data": ` + strings.Replace(data1MB, ":", " : ", 1) + `}`), "", ""},
		{"media type with suffix", send(`{"text":"{}","mediaType":"application/vnd.api+json"}`), "", ""},
		{"media type 128", send(`{"text":"x","mediaType":"` + mt128 + `"}`), "", ""},
		{"media type parameters", send(`{"text":"x","mediaType":"text/plain; charset=utf-8"}`), "", ""},
		{"media type quoted parameter", send(`{"raw":"aGk=","mediaType":"multipart/mixed; boundary=\"a b\""}`), "", ""},
		{"media type upper case", send(`{"text":"x","mediaType":"Text/Plain; Charset=UTF-8"}`), "", ""},
		{"text 10 MB", send(`{"text":"` + text10MB + `"}`), "", ""},
		{"100 parts", send(repeatParts(100)), "", ""},
		{"ids 128", `{"taskId":"` + id128 + `","idempotencyKey":"` + id128 + `","message":{"messageId":"` + id128 + `","role":"user","parts":[{"text":"x"}]}}`, "", ""},
		{"task and key", `{"taskId":"t-1_A","idempotencyKey":"k_1-B","message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`, "", ""},
		{"unknown members ignored", `{"x-trace":"1","priority":9,"message":{"messageId":"m1","role":"user","extra":true,"parts":[{"text":"x","x-note":{}}]}}`, "", ""},
		{"other-case member ignored", `{"Message":5,"message":{"messageId":"m1","role":"user","parts":[{"text":"x","Text":1}]}}`, "", ""},

		// The payload itself.
		{"payload array", `[]`, "payload", "type"},
		{"payload string", `"x"`, "payload", "type"},
		{"payload null", `null`, "payload", "type"},
		{"payload truncated", `{"message":`, "payload.message", "syntax"},
		{"payload trailing", `{}x`, "payload", "syntax"},
		{"duplicate member", `{"message":{},"message":{}}`, "payload.message", "syntax"},
		{"duplicate nested member", send(`{"text":"a","text":"b"}`), "payload.message.parts[0].text", "syntax"},
		{"invalid UTF-8", send("{\"text\":\"\xff\"}"), "payload.message.parts[0].text", "syntax"},

		// message.
		{"message missing", `{}`, "payload.message", "required"},
		{"message other case only", `{"MESSAGE":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`, "payload.message", "required"},
		{"message not object", `{"message":"hi"}`, "payload.message", "type"},
		{"message null", `{"message":null}`, "payload.message", "type"},
		{"messageId missing", sendMsg(`"role":"user","parts":[{"text":"x"}]`), "payload.message.messageId", "required"},
		{"messageId number", sendMsg(`"messageId":1,"role":"user","parts":[{"text":"x"}]`), "payload.message.messageId", "type"},
		{"messageId empty", sendMsg(`"messageId":"","role":"user","parts":[{"text":"x"}]`), "payload.message.messageId", "minLength"},
		{"messageId 129", sendMsg(`"messageId":"` + id129 + `","role":"user","parts":[{"text":"x"}]`), "payload.message.messageId", "maxLength"},
		{"messageId pattern", sendMsg(`"messageId":"msg@001","role":"user","parts":[{"text":"x"}]`), "payload.message.messageId", "pattern"},
		{"messageId non-ASCII", sendMsg(`"messageId":"é","role":"user","parts":[{"text":"x"}]`), "payload.message.messageId", "pattern"},
		{"role missing", sendMsg(`"messageId":"m1","parts":[{"text":"x"}]`), "payload.message.role", "required"},
		{"role assistant", sendMsg(`"messageId":"m1","role":"assistant","parts":[{"text":"x"}]`), "payload.message.role", "enum"},
		{"role upper case", sendMsg(`"messageId":"m1","role":"User","parts":[{"text":"x"}]`), "payload.message.role", "enum"},
		{"role empty", sendMsg(`"messageId":"m1","role":"","parts":[{"text":"x"}]`), "payload.message.role", "enum"},
		{"role number", sendMsg(`"messageId":"m1","role":1,"parts":[{"text":"x"}]`), "payload.message.role", "type"},
		{"parts missing", sendMsg(`"messageId":"m1","role":"user"`), "payload.message.parts", "required"},
		{"parts object", sendMsg(`"messageId":"m1","role":"user","parts":{"text":"x"}`), "payload.message.parts", "type"},
		{"parts empty", send(``), "payload.message.parts", "minItems"},
		{"parts 101", send(repeatParts(101)), "payload.message.parts", "maxItems"},

		// Parts.
		{"part string", send(`"hi"`), "payload.message.parts[0]", "type"},
		{"part no content", send(`{}`), "payload.message.parts[0]", "oneOf"},
		{"part media type only", send(`{"mediaType":"text/plain"}`), "payload.message.parts[0]", "oneOf"},
		{"part two contents", send(`{"text":"a","url":"https://x.org"}`), "payload.message.parts[0]", "oneOf"},
		{"part empty text and data", send(`{"text":"","data":{}}`), "payload.message.parts[0]", "oneOf"},
		{"second part bad", send(`{"text":"a"},{"text":"b","raw":"aGk=","mediaType":"a/b"}`), "payload.message.parts[1]", "oneOf"},
		{"text number", send(`{"text":1}`), "payload.message.parts[0].text", "type"},
		{"text null", send(`{"text":null}`), "payload.message.parts[0].text", "type"},
		{"text over 10 MB", send(`{"text":"` + text10MB + `a"}`), "payload.message.parts[0].text", "maxLength"},
		{"raw without media type", send(`{"raw":"aGk="}`), "payload.message.parts[0].mediaType", "required"},
		{"raw not base64", send(`{"raw":"!!!!","mediaType":"a/b"}`), "payload.message.parts[0].raw", "format"},
		{"raw url alphabet", send(`{"raw":"-_-_","mediaType":"a/b"}`), "payload.message.parts[0].raw", "format"},
		{"raw bad padding", send(`{"raw":"aGk==","mediaType":"a/b"}`), "payload.message.parts[0].raw", "format"},
		{"raw newline", send(`{"raw":"aGk=\naGk=","mediaType":"a/b"}`), "payload.message.parts[0].raw", "format"},
		{"raw number", send(`{"raw":5,"mediaType":"a/b"}`), "payload.message.parts[0].raw", "type"},
		{"url relative", send(`{"url":"/a/b"}`), "payload.message.parts[0].url", "format"},
		{"url no scheme", send(`{"url":"example.com"}`), "payload.message.parts[0].url", "format"},
		{"url space", send(`{"url":"https://example.com/a b"}`), "payload.message.parts[0].url", "format"},
		{"url non-ASCII", send(`{"url":"https://example.com/é"}`), "payload.message.parts[0].url", "format"},
		{"url bad escape", send(`{"url":"https://example.com/%zz"}`), "payload.message.parts[0].url", "format"},
		{"url empty", send(`{"url":""}`), "payload.message.parts[0].url", "format"},
		{"url 2049", send(`{"url":"` + url2048 + `a"}`), "payload.message.parts[0].url", "maxLength"},
		{"url object", send(`{"url":{}}`), "payload.message.parts[0].url", "type"},
		{"data array", send(`{"data":[1,2]}`), "payload.message.parts[0].data", "type"},
		{"data null", send(`{"data":null}`), "payload.message.parts[0].data", "type"},
		{"data string", send(`{"data":"{}"}`), "payload.message.parts[0].data", "type"},
		{"data over 1 MB", send(`{"data":{"k":"` + strings.Repeat("a", snap.MaxDataSize-7) + `"}}`), "payload.message.parts[0].data", "maxSize"},
		{"media type empty", send(`{"text":"x","mediaType":""}`), "payload.message.parts[0].mediaType", "format"},
		{"media type no slash", send(`{"text":"x","mediaType":"text"}`), "payload.message.parts[0].mediaType", "format"},
		{"media type bad parameter", send(`{"text":"x","mediaType":"text/plain; charset"}`), "payload.message.parts[0].mediaType", "format"},
		{"media type bad raw", send(`{"raw":"aGk=","mediaType":"image/png; q=\"1"}`), "payload.message.parts[0].mediaType", "format"},
		{"media type 129", send(`{"text":"x","mediaType":"` + mt128 + `a"}`), "payload.message.parts[0].mediaType", "maxLength"},
		{"media type number", send(`{"text":"x","mediaType":1}`), "payload.message.parts[0].mediaType", "type"},

		// taskId and idempotencyKey.
		{"taskId number", `{"taskId":7,` + send(`{"text":"x"}`)[1:], "payload.taskId", "type"},
		{"taskId null", `{"taskId":null,` + send(`{"text":"x"}`)[1:], "payload.taskId", "type"},
		{"taskId empty", `{"taskId":"",` + send(`{"text":"x"}`)[1:], "payload.taskId", "minLength"},
		{"taskId 129", `{"taskId":"` + id129 + `",` + send(`{"text":"x"}`)[1:], "payload.taskId", "maxLength"},
		{"taskId pattern", `{"taskId":"../etc",` + send(`{"text":"x"}`)[1:], "payload.taskId", "pattern"},
		{"idempotencyKey bool", `{"idempotencyKey":true,` + send(`{"text":"x"}`)[1:], "payload.idempotencyKey", "type"},
		{"idempotencyKey empty", `{"idempotencyKey":"",` + send(`{"text":"x"}`)[1:], "payload.idempotencyKey", "minLength"},
		{"idempotencyKey 129", `{"idempotencyKey":"` + id129 + `",` + send(`{"text":"x"}`)[1:], "payload.idempotencyKey", "maxLength"},
		{"idempotencyKey pattern", `{"idempotencyKey":"k/1",` + send(`{"text":"x"}`)[1:], "payload.idempotencyKey", "pattern"},

		// Types are checked over the whole payload before constraints.
		{"type before constraint", `{"taskId":1,"message":{"messageId":"bad id","role":"user","parts":[{"text":"x"}]}}`, "payload.taskId", "type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkCase(t, c, func(b []byte) error { _, err := snap.ParseSendParams(b); return err })
		})
	}
}

func TestParseSendParamsValues(t *testing.T) {
	r, err := snap.ParseSendParams([]byte(`{"taskId":"t1","idempotencyKey":"k1","message":{"messageId":"m1","role":"agent","parts":[` +
		`{"text":""},{"raw":"aGk=","mediaType":"image/png"},{"url":"https://x.org"},{"data":{ "a" : [1, 2] }}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := r.Message.Parts
	switch {
	case r.TaskID != "t1" || r.IdempotencyKey != "k1" || r.Message.MessageID != "m1" || r.Message.Role != snap.RoleAgent:
		t.Fatalf("fields: %+v", r)
	case p[0].Text == nil || *p[0].Text != "" || p[0].Raw != nil:
		t.Fatalf("empty text part: %+v", p[0])
	case p[1].Raw == nil || *p[1].Raw != "aGk=" || p[1].MediaType != "image/png":
		t.Fatalf("raw part: %+v", p[1])
	case p[2].URL == nil || *p[2].URL != "https://x.org":
		t.Fatalf("url part: %+v", p[2])
	case string(p[3].Data) != `{"a":[1,2]}`:
		t.Fatalf("data part kept as %s, want compact", p[3].Data)
	}
}

func TestParseGetParams(t *testing.T) {
	cases := []payloadCase{
		{"task only", `{"taskId":"t1"}`, "", ""},
		{"history 0", `{"taskId":"t1","historyLength":0}`, "", ""},
		{"history 1000", `{"taskId":"t1","historyLength":1000}`, "", ""},
		{"history 1.0", `{"taskId":"t1","historyLength":1.0}`, "", ""},
		{"history 1e2", `{"taskId":"t1","historyLength":1e2}`, "", ""},
		{"unknown member", `{"taskId":"t1","x-y":[]}`, "", ""},
		{"empty payload", ``, "payload.taskId", "required"},
		{"taskId missing", `{"historyLength":1}`, "payload.taskId", "required"},
		{"taskId other case", `{"TaskId":"t1"}`, "payload.taskId", "required"},
		{"taskId number", `{"taskId":1}`, "payload.taskId", "type"},
		{"taskId empty", `{"taskId":""}`, "payload.taskId", "minLength"},
		{"taskId 129", `{"taskId":"` + strings.Repeat("t", 129) + `"}`, "payload.taskId", "maxLength"},
		{"taskId pattern", `{"taskId":"a.b"}`, "payload.taskId", "pattern"},
		{"history -1", `{"taskId":"t1","historyLength":-1}`, "payload.historyLength", "minimum"},
		{"history 1001", `{"taskId":"t1","historyLength":1001}`, "payload.historyLength", "maximum"},
		{"history 1.5", `{"taskId":"t1","historyLength":1.5}`, "payload.historyLength", "type"},
		{"history string", `{"taskId":"t1","historyLength":"5"}`, "payload.historyLength", "type"},
		{"history null", `{"taskId":"t1","historyLength":null}`, "payload.historyLength", "type"},
		{"history huge", `{"taskId":"t1","historyLength":1e400}`, "payload.historyLength", "maximum"},
		{"history huge negative", `{"taskId":"t1","historyLength":-1e400}`, "payload.historyLength", "minimum"},
		{"not object", `[{"taskId":"t1"}]`, "payload", "type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkCase(t, c, func(b []byte) error { _, err := snap.ParseGetParams(b); return err })
		})
	}
	for lit, want := range map[string]int{"0": 0, "7": 7, "1000": 1000, "1.0": 1, "1e2": 100, "-0": 0} {
		r, err := snap.ParseGetParams([]byte(`{"taskId":"t1","historyLength":` + lit + `}`))
		if err != nil || r.HistoryLength == nil || *r.HistoryLength != want {
			t.Errorf("historyLength %s: got %v, %v; want %d", lit, r, err, want)
		}
	}
	if r, err := snap.ParseGetParams([]byte(`{"taskId":"t1"}`)); err != nil || r.HistoryLength != nil || r.TaskID != "t1" {
		t.Errorf("no historyLength: %+v, %v", r, err)
	}
}

func TestParseCancelParams(t *testing.T) {
	cases := []payloadCase{
		{"ok", `{"taskId":"t1"}`, "", ""},
		{"unknown member", `{"taskId":"t1","reason":"x"}`, "", ""},
		{"missing", `{}`, "payload.taskId", "required"},
		{"number", `{"taskId":1}`, "payload.taskId", "type"},
		{"empty", `{"taskId":""}`, "payload.taskId", "minLength"},
		{"pattern", `{"taskId":"a b"}`, "payload.taskId", "pattern"},
		{"129", `{"taskId":"` + strings.Repeat("t", 129) + `"}`, "payload.taskId", "maxLength"},
		{"not object", `1`, "payload", "type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkCase(t, c, func(b []byte) error { _, err := snap.ParseCancelParams(b); return err })
		})
	}
}

func FuzzParseSendParams(f *testing.F) {
	for _, s := range []string{
		send(`{"text":"hello"}`),
		send(`{"raw":"aGk=","mediaType":"a/b"},{"data":{"a":1}},{"url":"https://x.org"}`),
		`{"taskId":"t","idempotencyKey":"k","message":{}}`,
		`[]`, `{"message":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := snap.ParseSendParams(b)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) || se.Code != snap.CodeInvalidPayload || !strings.HasPrefix(se.Field(), "payload") {
				t.Fatalf("error is not a 1004 on a payload field: %v", err)
			}
			return
		}
		// Whatever is accepted is a valid message.
		if err := r.Message.Validate(); err != nil {
			t.Fatalf("accepted payload holds an invalid message: %v", err)
		}
	})
}

func TestParseResubscribeParams(t *testing.T) {
	cases := []payloadCase{
		{"task only", `{"taskId":"t1"}`, "", ""},
		{"after 0", `{"taskId":"t1","afterVersion":0}`, "", ""},
		{"after 3.0", `{"taskId":"t1","afterVersion":3.0}`, "", ""},
		{"after max", `{"taskId":"t1","afterVersion":9007199254740991}`, "", ""},
		{"tasks/get's historyLength ignored", `{"taskId":"t1","historyLength":1}`, "", ""},
		{"unknown members ignored", `{"z":1,"taskId":"t1","x-trace":{"b":2}}`, "", ""},
		{"empty payload", ``, "payload.taskId", "required"},
		{"taskId missing", `{"afterVersion":1}`, "payload.taskId", "required"},
		{"taskId number", `{"taskId":1}`, "payload.taskId", "type"},
		{"taskId pattern", `{"taskId":"a.b"}`, "payload.taskId", "pattern"},
		{"taskId 129", `{"taskId":"` + strings.Repeat("t", 129) + `"}`, "payload.taskId", "maxLength"},
		{"after -1", `{"taskId":"t1","afterVersion":-1}`, "payload.afterVersion", "minimum"},
		{"after 1.5", `{"taskId":"t1","afterVersion":1.5}`, "payload.afterVersion", "type"},
		{"after string", `{"taskId":"t1","afterVersion":"3"}`, "payload.afterVersion", "type"},
		{"after null", `{"taskId":"t1","afterVersion":null}`, "payload.afterVersion", "type"},
		{"after 2^53", `{"taskId":"t1","afterVersion":9007199254740992}`, "payload.afterVersion", "maximum"},
		{"after huge", `{"taskId":"t1","afterVersion":1e400}`, "payload.afterVersion", "maximum"},
		{"after huge negative", `{"taskId":"t1","afterVersion":-1e400}`, "payload.afterVersion", "minimum"},
		{"duplicate member", `{"taskId":"t1","taskId":"t2"}`, "payload.taskId", "syntax"},
		{"not object", `["t1"]`, "payload", "type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkCase(t, c, func(b []byte) error { _, err := snap.ParseResubscribeParams(b); return err })
		})
	}
	for lit, want := range map[string]int64{"0": 0, "7": 7, "3.0": 3, "1e2": 100, "-0": 0} {
		r, err := snap.ParseResubscribeParams([]byte(`{"taskId":"t1","afterVersion":` + lit + `}`))
		if err != nil || r.AfterVersion == nil || *r.AfterVersion != want {
			t.Errorf("afterVersion %s: got %v, %v; want %d", lit, r, err, want)
		}
	}
	if r, err := snap.ParseResubscribeParams([]byte(`{"taskId":"t1"}`)); err != nil || r.AfterVersion != nil || r.TaskID != "t1" {
		t.Errorf("no afterVersion: %+v, %v", r, err)
	}
}

func FuzzParseResubscribeParams(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"t1"}`, `{"taskId":"t1","afterVersion":12}`, `{"taskId":"t1","afterVersion":1e3}`,
		`{"taskId":"t1","x":1}`, `[]`, `{"afterVersion":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := snap.ParseResubscribeParams(b)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) || se.Code != snap.CodeInvalidPayload || !strings.HasPrefix(se.Field(), "payload") {
				t.Fatalf("error is not a 1004 on a payload field: %v", err)
			}
			return
		}
		if snap.CheckID("taskId", r.TaskID) != nil {
			t.Fatalf("accepted taskId %q", r.TaskID)
		}
		if v := r.AfterVersion; v != nil && (*v < 0 || *v > snap.MaxAfterVersion) {
			t.Fatalf("accepted afterVersion %d", *v)
		}
	})
}

// An integer param that breaks a rule is answered as the envelope's
// timestamp is: a number out of range echoed as the number it is, not as
// a string; a number with a fraction is a type failure whose received is
// the JSON type, "number", as every type failure's; a literal beyond a
// double's range, which has no number to echo, as its text.
func TestParamsEchoNumbers(t *testing.T) {
	cases := []struct {
		payload    string
		parse      func([]byte) error
		constraint string
		received   string // data.received as JSON
	}{
		{`{"taskId":"t1","historyLength":1001}`, getParams, "maximum", `1001`},
		{`{"taskId":"t1","historyLength":-1}`, getParams, "minimum", `-1`},
		{`{"taskId":"t1","historyLength":2e3}`, getParams, "maximum", `2000`},
		{`{"taskId":"t1","historyLength":1.5}`, getParams, "type", `"number"`},
		{`{"taskId":"t1","historyLength":"5"}`, getParams, "type", `"string"`},
		{`{"taskId":"t1","historyLength":1e400}`, getParams, "maximum", `"1e400"`},
		{`{"taskId":"t1","afterVersion":9007199254740992}`, resubscribeParams, "maximum", `9007199254740992`},
		{`{"taskId":"t1","afterVersion":-3}`, resubscribeParams, "minimum", `-3`},
		{`{"taskId":"t1","afterVersion":0.5}`, resubscribeParams, "type", `"number"`},
	}
	for _, c := range cases {
		var se *snap.Error
		if err := c.parse([]byte(c.payload)); !errors.As(err, &se) {
			t.Errorf("%s: %v, want a *snap.Error", c.payload, err)
			continue
		}
		got, err := json.Marshal(se.Data["received"])
		if err != nil {
			t.Fatal(err)
		}
		if se.Data["constraint"] != c.constraint || string(got) != c.received {
			t.Errorf("%s: constraint %v, received %s; want %s, %s", c.payload, se.Data["constraint"], got, c.constraint, c.received)
		}
	}
}

func getParams(b []byte) error         { _, err := snap.ParseGetParams(b); return err }
func resubscribeParams(b []byte) error { _, err := snap.ParseResubscribeParams(b); return err }
