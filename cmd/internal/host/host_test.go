package host

import (
	"os"
	"strings"
	"testing"
)

func TestLoadAvg(t *testing.T) {
	got := LoadAvg()
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		if got != "unknown" {
			t.Fatalf("without /proc/loadavg: %q", got)
		}
		return
	}
	if f := strings.Fields(got); len(f) != 3 {
		t.Fatalf("LoadAvg() = %q, want three fields", got)
	}
}
