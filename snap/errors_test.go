package snap_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

func TestCodeOf(t *testing.T) {
	notFound := snap.NewError(snap.CodeTaskNotFound, "task not found", nil)
	for _, c := range []struct {
		err  error
		want snap.Code
	}{
		{nil, 0},
		{errors.New("plain"), 0},
		{notFound, snap.CodeTaskNotFound},
		{fmt.Errorf("tasks: %w", notFound), snap.CodeTaskNotFound},
	} {
		if got := snap.CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
