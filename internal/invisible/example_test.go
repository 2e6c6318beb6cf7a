package invisible_test

import (
	"encoding/json"
	"fmt"

	"github.com/snapnode/snapnode/internal/invisible"
)

func ExampleEscapeJSON() {
	// A file name that reads "report_exe.pdf" with its end reversed.
	b, _ := json.Marshal(map[string]string{"name": "report_\u202efdp.exe"})
	fmt.Println(string(invisible.EscapeJSON(b)))
	// Output: {"name":"report_\u202efdp.exe"}
}
