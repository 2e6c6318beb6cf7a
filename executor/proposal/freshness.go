package proposal

import (
	"fmt"
	"strconv"
	"time"
)

// CheckCreatedAt refuses a peer's descriptor that was not made now: its
// created_at, or a child's, more than window before or after now
// (ErrValidation naming the field, rule clockSkew). A descriptor claims
// to be a fresh request; one dated years ahead or long ago is a replayed,
// stored or forged one, and the host does not act on it. The window is
// meant to be the one the host gives message timestamps, so that a
// descriptor and the message carrying it are judged by one clock.
// ParseDescriptor does not call it: it reads no clock.
func CheckCreatedAt(d *Descriptor, now time.Time, window time.Duration) error {
	if err := checkCreatedAt(d, "", now, window); err != nil {
		return err
	}
	for i, ch := range d.Children {
		if err := checkCreatedAt(ch, "/children/"+strconv.Itoa(i), now, window); err != nil {
			return err
		}
	}
	return nil
}

func checkCreatedAt(d *Descriptor, at string, now time.Time, window time.Duration) *Error {
	if c := d.CreatedAt; c.Before(now.Add(-window)) || c.After(now.Add(window)) {
		field := at + "/created_at"
		return validation(field, "clockSkew", fmt.Sprintf(
			"Field %s (%s) is more than %s from the host's clock (%s): a descriptor must be made when it is sent.",
			field, c.UTC().Format(time.RFC3339), window, now.UTC().Format(time.RFC3339)))
	}
	return nil
}
