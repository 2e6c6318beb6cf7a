// Command snapnode is the SNAP agent node: its operator and client
// sub-commands. It only parses flags, reads input and prints results; the
// protocol lives in the identity and snap packages.
//
// Exit status: 0 on success, 1 when the input was read but failed (an
// invalid message or card, a refused key file, a signing failure), 2 on a
// usage error or input that could not be read.
package main
