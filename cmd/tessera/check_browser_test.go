package main

import (
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/model"
)

// checkReport is the page's report of Tessera.check (?check=, ?checkbad=).
type checkReport struct {
	Runs map[string]struct {
		Error        string           `json:"error"`
		OK           bool             `json:"ok"`
		Problems     []string         `json:"problems"`
		Warnings     []string         `json:"warnings"`
		Backend      string           `json:"backend"`
		WeightBytes  int64            `json:"weightBytes"`
		VisionBytes  int64            `json:"visionBytes"`
		DecodeBytes  int64            `json:"decodeBytesPerToken"`
		DecodeByType map[string]int64 `json:"decodeBytesByType"`
		Context      int64            `json:"context"`
		MemoryBytes  int64            `json:"memoryBytes"`
		HeapLimit    int64            `json:"heapLimit"`
		FitsCPU      bool             `json:"fitsCPU"`
		CPU          struct {
			DecodeTokPerSec float64 `json:"decodeTokPerSec"`
			Kernels         []struct {
				Type     string  `json:"type"`
				GBps     float64 `json:"gbPerSec"`
				Measured bool    `json:"measured"`
			} `json:"kernels"`
			Kernel string `json:"kernel"`
		} `json:"cpu"`
		Download struct {
			Bytes       int64 `json:"bytes"`
			Stored      int64 `json:"stored"`
			Vision      int64 `json:"vision"`
			FitsStorage bool  `json:"fitsStorage"`
		} `json:"download"`
		BytesFetched int64    `json:"bytesFetched"`
		Keys         []string `json:"keys"`
	} `json:"runs"`
	Bad   map[string]string `json:"bad"`
	Tight struct {
		Error       string   `json:"error"`
		FitsStorage bool     `json:"fitsStorage"`
		Warnings    []string `json:"warnings"`
		Context     int64    `json:"context"`
		MemoryBytes int64    `json:"memoryBytes"`
	} `json:"tight"`
	BadContext string `json:"badContext"`
}

// e2eCheckCtx is the context of the page's check with a tiny quota.
const e2eCheckCtx = 8192

// e2eCheckBad are the models Tessera.check must refuse in TestBrowserE2E,
// with a part of each one's error: no manifest, a server without Range
// requests (the check reads headers only), a GGUF file whose tensors run
// past its end.
var e2eCheckBad = map[string]string{
	"/nope/":           "no model.manifest.json",
	"/vision-norange/": "needs a server that serves ranges",
	"/gguf/half.gguf":  "runs past the end of the file",
}

// e2eCheckModelCheck checks the page's Tessera.check runs: models maps
// each checked URL to its directory or GGUF file here, whose header
// (model.CheckHeader) gives the figures the browser must report; the
// check fetches the headers alone and stores no weights; tightURL is the
// model checked with a 1000-byte quota at a context of tightCtx; bad maps
// each ?checkbad= URL to a part of its error.
func e2eCheckModelCheck(t testing.TB, c *checkReport, models map[string]string, tightURL string, tightCtx int64, bad map[string]string) {
	t.Helper()
	if c == nil {
		t.Fatal("no Tessera.check report")
	}
	for u, path := range models {
		r, ok := c.Runs[u]
		if !ok || r.Error != "" {
			t.Errorf("Tessera.check(%s): %+v", u, r)
			continue
		}
		n := nativeNeeds(t, path)
		byType := map[string]int64{}
		for ty, b := range n.Decode {
			byType[ty.String()] = b
		}
		if r.WeightBytes != n.Weights || r.VisionBytes != n.Vision || r.DecodeBytes != n.DecodeBytes() || !maps.Equal(r.DecodeByType, byType) ||
			r.MemoryBytes != n.Memory(r.Context) {
			t.Errorf("Tessera.check(%s): weights %d, vision %d, decode %d %v, memory %d at %d; native header: %d, %d, %d %v, %d",
				u, r.WeightBytes, r.VisionBytes, r.DecodeBytes, r.DecodeByType, r.MemoryBytes, r.Context, n.Weights, n.Vision, n.DecodeBytes(), byType, n.Memory(r.Context))
		}
		if !r.OK || len(r.Problems) > 0 || r.Backend != "cpu" || !r.FitsCPU || r.HeapLimit < 3<<30 {
			t.Errorf("Tessera.check(%s): ok %v, problems %q, backend %q, fits %v, heap limit %d", u, r.OK, r.Problems, r.Backend, r.FitsCPU, r.HeapLimit)
		}
		if r.CPU.DecodeTokPerSec <= 0 || len(r.CPU.Kernels) == 0 || !r.CPU.Kernels[0].Measured || r.CPU.Kernels[0].GBps <= 0 || !strings.Contains(r.CPU.Kernel, "SIMD128") {
			t.Errorf("Tessera.check(%s): CPU estimate %+v", u, r.CPU)
		}
		// What a load would download: the manifest's parts, less the
		// vision tower's; the check itself fetched its 1 MiB header window
		// and the small files, and stored no weights.
		raw, err := os.ReadFile(manifestPath(path))
		if err != nil {
			t.Fatal(err)
		}
		var mf modelManifest
		if err := json.Unmarshal(raw, &mf); err != nil {
			t.Fatal(err)
		}
		var text, vision, weights int64
		for _, f := range mf.Files {
			if !strings.HasSuffix(f.Name, ".safetensors") && !strings.HasSuffix(f.Name, ".gguf") {
				continue
			}
			weights += f.Size
			for _, p := range f.Parts {
				if p.Vision {
					vision += p.Size
				}
			}
		}
		for _, f := range mf.Files {
			text += f.Size
		}
		text -= vision
		if r.Download.Bytes != text || r.Download.Stored != 0 || r.Download.Vision != vision || !r.Download.FitsStorage {
			t.Errorf("Tessera.check(%s): download %+v, want %d bytes (vision %d) to download, none stored", u, r.Download, text, vision)
		}
		small := text - (weights - vision)
		if r.BytesFetched > small+1<<20 || r.BytesFetched == 0 {
			t.Errorf("Tessera.check(%s) fetched %d bytes; the weights are %d, the small files %d", u, r.BytesFetched, weights, small)
		}
		for _, k := range r.Keys {
			if strings.Contains(k, ".safetensors") || strings.Contains(k, ".gguf?") {
				t.Errorf("Tessera.check(%s) stored %s", u, k)
			}
		}
		t.Logf("Tessera.check(%s): %d weight bytes, decode ≈ %.0f tok/s (%+v), fetched %d bytes", u, r.WeightBytes, r.CPU.DecodeTokPerSec, r.CPU.Kernels, r.BytesFetched)
	}
	for u, want := range bad {
		if got := c.Bad[u]; !strings.Contains(got, want) {
			t.Errorf("Tessera.check(%s): %q, want an error containing %q", u, got, want)
		}
	}
	n := nativeNeeds(t, models[tightURL])
	if tt := c.Tight; tt.Error != "" || tt.FitsStorage || len(tt.Warnings) == 0 || !strings.Contains(tt.Warnings[0], "not enough browser storage") ||
		tt.Context != tightCtx || tt.MemoryBytes != n.Memory(tightCtx) {
		t.Errorf("Tessera.check with a 1000-byte quota at context %d: %+v; memory want %d", tightCtx, tt, n.Memory(tightCtx))
	}
	if !strings.Contains(c.BadContext, "context must be a positive whole number") {
		t.Errorf("Tessera.check with context 0: %q", c.BadContext)
	}
}

// nativeNeeds is what the model at path (a directory or a GGUF file)
// needs, from its header, natively.
func nativeNeeds(t testing.TB, path string) model.Needs {
	t.Helper()
	m, ck, err := model.OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	n, err := model.CheckHeader(m.Cfg, ck)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
