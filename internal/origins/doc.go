// Package origins decides which web pages may talk to a server of the
// node, and under which names it may be addressed: a page in the
// operator's browser reaches the node's loopback listeners as any
// program on the machine does. The HTTP transport (snaphttp), the
// embedded relay and the settings that configure them share it.
//
// An origin is written as browsers send it in the Origin header,
// "scheme://host[:port]"; "*" stands for every origin (or, in a list of
// hosts, every host).
package origins
