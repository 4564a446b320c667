package wgsl

import "time"

// ExpertStats count a runner's routed-expert cache since it was made.
// When every expert is resident Streaming is false, Slots = Experts and
// the counters stay 0.
type ExpertStats struct {
	Streaming bool `json:"streaming"`
	Slots     int  `json:"slots"`     // experts resident per MoE layer
	Experts   int  `json:"experts"`   // routed experts per MoE layer
	MoELayers int  `json:"moeLayers"` // MoE layers
	// Hits and Misses count the distinct experts each run of tokens
	// needed at each layer: resident, or uploaded.
	Hits        int64         `json:"hits"`
	Misses      int64         `json:"misses"`
	UploadBytes int64         `json:"uploadBytes"` // bytes written into slots
	UploadTime  time.Duration `json:"uploadNs"`    // resolving, packing and writing misses
	Tokens      int64         `json:"tokens"`      // tokens run (counted when streaming or with CPU layers)
	// CPULayers MoE layers run their experts on the CPU
	// (RunnerOptions.CPUMoELayers), taking CPUTime to compute and write
	// back (the readbacks before, which wait for the GPU, not counted).
	CPULayers int           `json:"cpuLayers"`
	CPUTime   time.Duration `json:"cpuNs"`
}

// HitRate is Hits / (Hits + Misses) (1 with no lookups).
func (s ExpertStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 1
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// Sub is the counts of s since an earlier snapshot a.
func (s ExpertStats) Sub(a ExpertStats) ExpertStats {
	s.Hits -= a.Hits
	s.Misses -= a.Misses
	s.UploadBytes -= a.UploadBytes
	s.UploadTime -= a.UploadTime
	s.Tokens -= a.Tokens
	s.CPUTime -= a.CPUTime
	return s
}
