package testutil

// FlipHex returns s with its first hex digit changed, so that it is
// certain to differ from s (an id or a signature made invalid for a
// test). Setting a digit to a fixed value instead leaves s unchanged
// when it already held that value: 1 run in 16 for one digit.
func FlipHex(s string) string {
	if s[0] == '0' {
		return "1" + s[1:]
	}
	return "0" + s[1:]
}
