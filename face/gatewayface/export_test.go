package gatewayface

import "time"

// SetWriteStall sets how long a piece of a message may wait for the client,
// until the test ends.
func SetWriteStall(t interface{ Cleanup(func()) }, d time.Duration) {
	saved := writeStall
	writeStall = d
	t.Cleanup(func() { writeStall = saved })
}
