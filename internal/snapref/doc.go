// Package snapref finds the published SNAP test vectors and schemas for
// tests: the folder named by SNAPNODE_SNAP_REFERENCE, else
// shared/snap-reference beside the project root. The folder holds the
// schemas/ folder of the SNAP specification's repository and the contents
// of its test-vectors/ folder (canonical/, keys/, signatures/); its files
// are read from there, never copied into the project.
//
//	dir := snapref.Dir(t) // skips the test when the folder is absent
//	var v snapref.KeyVectors
//	snapref.Load(t, "keys/key-encoding.json", &v)
package snapref
