package sandbox

import "regexp"

// Policy is a placeholder while the real one is written.
type Policy struct {
	allow   []*regexp.Regexp
	escapes bool
}

func NewPolicy(allow ...string) (*Policy, error) { return &Policy{}, nil }

func (p *Policy) check(command, dir, boundary string) error { return nil }
