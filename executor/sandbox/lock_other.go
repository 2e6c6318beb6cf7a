//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package sandbox

import "os"

// Here the temporary files are not locked: Sweep removes every one; nor is
// the folder (lockFolder takes no lock): promotions and rollbacks run one
// at a time within a process only, and processes must not share a
// workspace folder.

func lockTemp(*os.File) error { return nil }

func abandoned(*os.File) bool { return true }

const folderLocks = false

func tryLockFolder(*os.File) (bool, error) { return true, nil }
