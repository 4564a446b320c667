//go:build cgo && !js && !unix

package wgsl_test

import (
	"testing"
	"time"
)

// cpuTime is 0 where the process's CPU time is not read (cpu-ms/piece
// then reads 0).
func cpuTime(*testing.B) time.Duration { return 0 }
