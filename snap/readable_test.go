package snap_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// TestCheckReadable reads testdata/readable_parts.json: a part whose media
// type (its mediaType, else text/plain for text and application/json for
// data) is not supported, or names a charset other than UTF-8, is refused
// with 1005 {provided, supported, field}; a raw part of a supported type
// must be UTF-8 once decoded (1004); a url part with no media type is read
// as its URL. The part is put second, after a text part, so that the
// index is seen in the field.
func TestCheckReadable(t *testing.T) {
	raw, err := os.ReadFile("testdata/readable_parts.json")
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Supported []string
		Cases     []struct {
			Name     string
			Part     json.RawMessage
			Code     snap.Code
			Field    string
			Provided string
		}
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	for _, c := range table.Cases {
		t.Run(c.Name, func(t *testing.T) {
			payload := fmt.Sprintf(`{"message":{"messageId":"m","role":"user","parts":[{"text":"first"},%s]}}`, c.Part)
			p, err := snap.ParseSendParams([]byte(payload))
			if err != nil {
				t.Fatalf("the schema refused the case: %v", err)
			}
			e := snap.CheckReadable("payload.message.parts", p.Message.Parts, table.Supported)
			if c.Code == 0 {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			field := "payload.message.parts[1]" + c.Field[len("parts[0]"):]
			if e == nil || e.Code != c.Code || e.Data["field"] != field {
				t.Fatalf("got %v, want %d naming %s", e, c.Code, field)
			}
			if c.Code == snap.CodeContentTypeNotSupported &&
				(e.Data["provided"] != c.Provided || fmt.Sprint(e.Data["supported"]) != fmt.Sprint(table.Supported)) {
				t.Fatalf("data %v, want provided %q and supported %v", e.Data, c.Provided, table.Supported)
			}
		})
	}
}
