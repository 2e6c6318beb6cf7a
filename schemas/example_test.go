package schemas_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/snapnode/snapnode/schemas"
)

// A worker's report on its phase is checked against the agent response
// schema: a COMPLETED report passes; one whose action the schema does not
// know is refused, the error naming the member (a JSON pointer) and the
// keyword it breaks.
func Example() {
	answers := []string{
		`{"action":"COMPLETED","evidence_files":["results.py"],"summary_for_supervisor":"Feature X done, tests pass."}`,
		`{"action":"FINISHED","evidence_files":[],"summary_for_supervisor":"Done."}`,
	}
	for _, a := range answers {
		var v any
		if err := json.Unmarshal([]byte(a), &v); err != nil {
			panic(err)
		}
		err := schemas.AgentResponse().Validate(v)
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			for len(ve.Causes) > 0 {
				ve = ve.Causes[0] // the innermost cause names the member
			}
			fmt.Println("refused: /"+strings.Join(ve.InstanceLocation, "/"), ve.ErrorKind.KeywordPath())
			continue
		}
		fmt.Println("valid:", err == nil)
	}

	// The files themselves are served as they are, for publication.
	raw, _ := fs.ReadFile(schemas.FS, schemas.AgentResponseFile)
	fmt.Println(strings.Contains(string(raw), schemas.AgentResponseID))
	// Output:
	// valid: true
	// refused: /action [enum]
	// true
}
