//go:build !linux

package main

import "os"

// isTTY reports whether f, a character device, is a terminal: on systems
// without the Linux check, any but the null device.
func isTTY(f *os.File) bool { return f.Name() != os.DevNull }
