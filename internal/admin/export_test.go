package admin

import "time"

// SetIOTimeout sets how long s waits on a client to send its request and
// to take its response.
func SetIOTimeout(s *Server, d time.Duration) { s.ioTimeout = d }
