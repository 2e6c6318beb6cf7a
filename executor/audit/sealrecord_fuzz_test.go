package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadSealRecord feeds ReadSealRecord the file the node keeps beside
// its database, as a crash, a disk or a hand could leave it. It never
// panics and refuses only with ErrSealRecord; a record it reads names a
// seal (seq from 1, a lowercase hash) and, written again by
// WriteSealRecord, reads the same.
func FuzzReadSealRecord(f *testing.F) {
	hash := strings.Repeat("ab", 32)
	for _, s := range []string{
		`{"seq":3,"hash":"` + hash + `","time":"2026-05-01T12:00:00Z"}` + "\n",
		`{"seq":1,"hash":"` + hash + `","time":"2026-05-01T12:00:00.123456789+05:30"}`,
		`{"seq":0,"hash":"` + hash + `"}`, `{"seq":1,"hash":"` + strings.ToUpper(hash) + `"}`,
		`{"seq":1,"hash":"` + hash + `","seq":2}`, `{"seq":9223372036854775807,"hash":"` + hash + `","time":"0001-01-01T00:00:00Z"}`,
		`{"seq":1e2,"hash":"` + hash + `"}`, `{"SEQ":1,"hash":"` + hash + `"}`, `null`, ``, `{"seq":1,"hash":"` + hash + `","time":"9999-12-31T23:59:59-23:59"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "seal.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := ReadSealRecord(path)
		if err != nil {
			if !errors.Is(err, ErrSealRecord) {
				t.Fatalf("%v is not ErrSealRecord", err)
			}
			return
		}
		if r.Seq < 1 || !isHexHash(r.Hash) || r.Path != path {
			t.Fatalf("read %+v", r)
		}
		again := filepath.Join(dir, "again.json")
		if err := WriteSealRecord(again, r); err != nil {
			t.Fatalf("a record read cannot be written again: %v", err)
		}
		r2, err := ReadSealRecord(again)
		if err != nil {
			t.Fatalf("a record read, written again, is refused: %v", err)
		}
		if r2.Seq != r.Seq || r2.Hash != r.Hash || !r2.Time.Equal(r.Time) {
			t.Fatalf("read %+v, written and read again %+v", r, r2)
		}
	})
}
