package main

import (
	"slices"
	"testing"
)

// sharedLoad is a load's statistics in the page's shared-engine check.
type sharedLoad struct {
	BytesDownloaded int64 `json:"bytesDownloaded"`
	Hits            int   `json:"hits"`
	Misses          int   `json:"misses"`
	Joined          bool  `json:"joined"`
	CacheSkipped    bool  `json:"cacheSkipped"`
	// StoreRead: how the store was read (loadStats.storeRead).
	StoreRead string `json:"storeRead"`
}

// sharedReport is the page's report of one engine shared by several
// Tessera instances and another tab (Tessera.load's shared option).
type sharedReport struct {
	Error  string     `json:"error"`
	First  sharedLoad `json:"first"`
	Second sharedLoad `json:"second"`
	Third  sharedLoad `json:"third"`
	Pages  *struct {
		Pages int `json:"pages"`
	} `json:"pages"`
	PagesWithChild *struct {
		Pages int `json:"pages"`
	} `json:"pagesWithChild"`
	PagesAfterDispose *struct {
		Pages int `json:"pages"`
	} `json:"pagesAfterDispose"`
	PagesAfterChild *struct {
		Pages   int `json:"pages"`
		Dropped int `json:"dropped"`
	} `json:"pagesAfterChild"`
	IDsA, IDsB, IDsAfterChild, IDsC []int
	WaitAbort                       struct {
		Done  bool    `json:"done"`
		Ms    float64 `json:"ms"`
		Stats struct {
			Tokens  int    `json:"tokens"`
			Stopped string `json:"stopped"`
			Waited  bool   `json:"waited"`
		} `json:"stats"`
	} `json:"waitAbort"`
	LongTokens int `json:"longTokens"`
	Chat       struct {
		Content string `json:"content"`
		Tokens  int    `json:"tokens"`
	} `json:"chat"`
	AfterChildMs float64 `json:"afterChildMs"`
	// Progress: how many progress events the first instance and the one
	// that joined while it loaded got, and the last of each.
	Progress struct {
		A, B         int
		ALast, BLast *struct {
			Loaded, Total int64
		}
	} `json:"progress"`
}

// e2eCheckShared checks the page's shared engine: the first load
// downloads and stores the model, the second, asked for meanwhile, sees
// its progress and joins it with nothing fetched; every generation gives the native greedy ids; a generation
// aborted while waiting its turn ends with no token; another tab that
// goes mid-generation is dropped; the engine is freed with its last page
// and loads again from the store.
func e2eCheckShared(t testing.TB, s *sharedReport, native []int) {
	t.Helper()
	if s == nil || s.Error != "" {
		t.Errorf("shared engine: %+v", s)
		return
	}
	if s.First.BytesDownloaded == 0 || s.First.Joined || s.First.CacheSkipped || s.Second.BytesDownloaded != 0 || !s.Second.Joined {
		t.Errorf("shared engine: first load %+v, second %+v; want a download, then a join with nothing fetched", s.First, s.Second)
	}
	if p := s.Progress; p.A == 0 || p.B == 0 || p.ALast == nil || p.BLast == nil || *p.BLast != *p.ALast || p.BLast.Loaded != p.BLast.Total {
		t.Errorf("shared engine: progress events %+v; want some for the page that joined during the load, the last one the whole model, as the loading page's", p)
	}
	if s.Pages == nil || s.Pages.Pages != 2 || s.PagesWithChild == nil || s.PagesWithChild.Pages != 3 || s.PagesAfterDispose == nil || s.PagesAfterDispose.Pages != 1 {
		t.Errorf("shared engine: pages %+v, with the other tab %+v, after one dispose %+v; want 2, 3, 1", s.Pages, s.PagesWithChild, s.PagesAfterDispose)
	}
	for name, ids := range map[string][]int{"first instance": s.IDsA, "second instance, at the same time": s.IDsB, "after the other tab closed": s.IDsAfterChild, "reloaded": s.IDsC} {
		if !slices.Equal(ids, native) {
			t.Errorf("shared engine, %s: ids %v, native %v", name, ids, native)
		}
	}
	if s.Chat.Tokens == 0 {
		t.Errorf("shared engine: a chat completion gave %+v", s.Chat)
	}
	// the closed tab's endless generation was stopped, not finished
	if c := s.PagesAfterChild; c == nil || c.Pages != 2 || c.Dropped != 1 {
		t.Errorf("shared engine after the other tab closed: %+v; want 2 pages and its generation dropped", c)
	}
	if w := s.WaitAbort; !w.Done || w.Stats.Stopped != "cancelled" || w.Stats.Tokens != 0 || !w.Stats.Waited || s.LongTokens == 0 {
		t.Errorf("shared engine: a generation aborted while it waited: %+v (the one before it gave %d tokens); want it ended with no token", w, s.LongTokens)
	}
	// a shared worker has no synchronous handles; a stored part is read whole
	if s.Third.Joined || s.Third.BytesDownloaded != 0 || s.Third.Hits == 0 || s.Third.Misses != 0 || (s.Third.StoreRead != "byob" && s.Third.StoreRead != "stream") {
		t.Errorf("shared engine: load after the last page disposed: %+v; want a new engine, every file from the store", s.Third)
	}
	t.Logf("shared engine: second load joined (0 bytes, %d progress events to the first's %d); the store read by %s; abort while waiting ended in %.0f ms; after the other tab closed, the next generation took %.0f ms", s.Progress.B, s.Progress.A, s.Third.StoreRead, s.WaitAbort.Ms, s.AfterChildMs)
}
