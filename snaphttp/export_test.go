package snaphttp

// AnswerMemoryHeld reports what s's answers hold of AnswerMemory now: the
// bytes in all, and the peers holding some.
func AnswerMemoryHeld(s *Server) (used int64, peers int) {
	s.answers.mu.Lock()
	defer s.answers.mu.Unlock()
	return s.answers.used, len(s.answers.peers)
}
