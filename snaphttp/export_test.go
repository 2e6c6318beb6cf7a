package snaphttp

// AnswerMemoryHeld reports what s's answers hold of AnswerMemory now: the
// bytes in all, and the peers holding some; and the bytes and peers of
// the answers waiting for room.
func AnswerMemoryHeld(s *Server) (used int64, peers int, waiting int64, waitingPeers int) {
	s.answers.mu.Lock()
	defer s.answers.mu.Unlock()
	return s.answers.used, len(s.answers.peers), s.answers.waiting, len(s.answers.peerWaiting)
}

// SetDrained makes Serve call f once shutdown began (streams ended,
// WebSocket connections told), before it waits for anything.
func SetDrained(s *Server, f func()) { s.drained = f }

// SetSocketRead makes each WebSocket of s call f after each read from its
// socket that brought bytes (n), once the WebSocket counted that read:
// what f was told of, the WebSocket knows came before a shutdown begun
// after it. Set it before Serve.
func SetSocketRead(s *Server, f func(n int)) { s.socketRead = f }
