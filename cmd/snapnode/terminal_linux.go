package main

import (
	"os"
	"syscall"
	"unsafe"
)

// isTTY reports whether f, a character device, is a terminal: it has
// terminal attributes (TCGETS), which /dev/null has not.
func isTTY(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var errno syscall.Errno
	var t syscall.Termios
	if rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	}) != nil {
		return false
	}
	return errno == 0
}
