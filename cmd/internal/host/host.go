// Package host reports what a benchmark records about the machine it ran
// on, so its numbers can be read with the load beside them.
package host

import (
	"os"
	"strings"
)

// LoadAvg is the 1, 5 and 15 minute load averages from /proc/loadavg
// ("unknown" where there is none).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
