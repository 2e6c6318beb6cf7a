package testreport_test

import (
	"os"
	"strings"

	"github.com/snapnode/snapnode/internal/testreport"
)

func Example() {
	stream := strings.Join([]string{
		`{"Action":"run","Package":"example.com/p","Test":"TestStore"}`,
		`{"Action":"pass","Package":"example.com/p","Test":"TestStore","Elapsed":0.2}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestPostgres","Output":"    pg_test.go:9: PostgreSQL tests skipped: set SNAPNODE_TEST_POSTGRES to run them\n"}`,
		`{"Action":"skip","Package":"example.com/p","Test":"TestPostgres"}`,
		`{"Action":"pass","Package":"example.com/p","Elapsed":0.4}`,
	}, "\n")
	rep := testreport.New(os.Stdout, testreport.ProjectNeeds())
	_ = rep.Read(strings.NewReader(stream))
	rep.Summary()
	// Output:
	// ok   example.com/p 0.4s (1 passed, 1 skipped)
	//
	// ran 1 test in 1 package: 1 passed, 0 failed; skipped 1 (1 need PostgreSQL): run scripts/test-all for PostgreSQL
}
