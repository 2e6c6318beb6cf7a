// Package executor will turn proposals into action descriptors, judge them
// by policy, run them in the os.Root sandbox, diff, promote or hold them for
// confirmation, and write the hash-chained audit log. It must not know SNAP
// or Nostr. Nothing is implemented yet: it arrives with the proposals issue.
package executor
