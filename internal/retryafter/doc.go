// Package retryafter reads how long a server asks a client to wait: the
// Retry-After header in its two forms, and a wait in seconds such as a
// SNAP error's data.retryAfter. The SNAP client and the agent's model
// client read them with it.
//
//	wait := retryafter.Parse(resp.Header.Get("Retry-After"), time.Now())
//	wait = min(wait, time.Minute) // the longest the caller will wait
package retryafter
