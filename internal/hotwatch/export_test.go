package hotwatch

// Len returns how many keys of app are hot in s.
func (s *Snapshot) Len(app string) int { return len(s.apps[app]) }
