package engine

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/tessera-llm/tessera/core/chat"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/core/safetensors"
)

const microDir = "../../models/k3-micro"

func openMicro(t *testing.T, cache int64) *Engine {
	t.Helper()
	e, err := Open(microDir, OpenOptions{PrefixCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// turn generates a greedy reply to msgs and returns it with the logits of
// its first token and the stats.
func turn(t *testing.T, e *Engine, msgs []chat.Message, n int) (string, []float32, Stats) {
	t.Helper()
	var first []float32
	var out strings.Builder
	st, err := e.Generate(context.Background(), Options{Chat: &chat.Input{Messages: msgs}, MaxTokens: n,
		inspect: func(l []float32) {
			if first == nil {
				first = append([]float32(nil), l...)
			}
		}}, func(p Piece) bool { out.WriteString(p.Text); return true })
	if err != nil {
		t.Fatal(err)
	}
	return out.String() + st.Tail, first, st
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// Turn n of a chat resumes from the state turn n−1 left in the prefix
// cache, prefilling only the new turn, and the logits equal a cold run's.
func TestPrefixCacheChatTurns(t *testing.T) {
	warm, cold := openMicro(t, 64<<20), openMicro(t, 0)
	msgs := []chat.Message{{Role: "system", Content: chat.Text("You are a helpful assistant.")}, {Role: "user", Content: chat.Text("And God said")}}
	for n := 1; n <= 3; n++ {
		reply, wl, ws := turn(t, warm, msgs, 12)
		_, cl, cs := turn(t, cold, msgs, 12)
		if d := maxDiff(wl, cl); d > 1e-5 {
			t.Fatalf("turn %d: logits differ from a cold run by %g", n, d)
		}
		if cs.CachedTokens != 0 || ws.PromptTokens != cs.PromptTokens {
			t.Fatalf("turn %d: cold %+v, warm %+v", n, cs, ws)
		}
		if n == 1 && ws.CachedTokens != 0 {
			t.Fatalf("turn 1 hit the cache: %+v", ws)
		}
		if n > 1 && ws.CachedTokens < ws.PromptTokens/2 {
			t.Fatalf("turn %d resumed %d of %d prompt tokens", n, ws.CachedTokens, ws.PromptTokens)
		}
		t.Logf("turn %d: %d prompt tokens, %d from the cache", n, ws.PromptTokens, ws.CachedTokens)
		msgs = append(msgs, chat.Message{Role: "assistant", Content: chat.Text(reply)}, chat.Message{Role: "user", Content: chat.Text("Tell me more.")})
	}
	if s := warm.Totals().Cache; s.Hits < 2 || s.SavedTokens == 0 {
		t.Errorf("cache stats %+v", s)
	}
}

// Requests that share a system prompt resume from its state.
func TestPrefixCacheSharedSystem(t *testing.T) {
	e := openMicro(t, 64<<20)
	sys := chat.Message{Role: "system", Content: chat.Text("You answer in one short sentence about the weather in spring.")}
	_, _, s1 := turn(t, e, []chat.Message{sys, {Role: "user", Content: chat.Text("Hello")}}, 2)
	_, _, s2 := turn(t, e, []chat.Message{sys, {Role: "user", Content: chat.Text("Something else entirely")}}, 2)
	if s1.CachedTokens != 0 || s2.CachedTokens == 0 {
		t.Fatalf("first %+v, second %+v", s1, s2)
	}
}

// The prefix cache keeps its byte budget, dropping the least recently
// used snapshots.
func TestPrefixCacheBudget(t *testing.T) {
	e := openMicro(t, 64<<20)
	turn(t, e, []chat.Message{{Role: "user", Content: chat.Text("a")}}, 2)
	one := e.Cache.Stats().Bytes
	e.Cache = NewPrefixCache(one * 3 / 2)
	for _, u := range []string{"one", "two", "three"} {
		turn(t, e, []chat.Message{{Role: "user", Content: chat.Text(u)}}, 2)
		if s := e.Cache.Stats(); s.Bytes > s.Budget {
			t.Fatalf("cache over budget: %+v", s)
		}
	}
}

// A saved conversation resumes in another engine without prefilling it
// again, and is refused by another model or format version.
func TestConversationSaveRestore(t *testing.T) {
	a := openMicro(t, 64<<20)
	msgs := []chat.Message{{Role: "user", Content: chat.Text("In the beginning")}}
	reply, _, _ := turn(t, a, msgs, 10)
	msgs = append(msgs, chat.Message{Role: "assistant", Content: chat.Text(reply)})
	path := filepath.Join(t.TempDir(), "chat.session")
	if err := a.SaveConversationFile(path, Conversation{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	b, cold := openMicro(t, 64<<20), openMicro(t, 0)
	c, err := b.LoadConversationFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 2 || c.Messages[1].Content.String() != reply {
		t.Fatalf("restored %+v", c)
	}
	next := append(c.Messages, chat.Message{Role: "user", Content: chat.Text("Go on.")})
	_, bl, bs := turn(t, b, next, 4)
	_, cl, cs := turn(t, cold, next, 4)
	if bs.CachedTokens == 0 || bs.CachedTokens < cs.PromptTokens-20 {
		t.Fatalf("resumed %d of %d prompt tokens", bs.CachedTokens, cs.PromptTokens)
	}
	if d := maxDiff(bl, cl); d > 1e-5 {
		t.Fatalf("resumed logits differ from a cold run by %g", d)
	}
	data, _ := os.ReadFile(path)
	other, err := Load(safetensors.MemOpener(nanoFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.Cache = NewPrefixCache(1 << 20)
	if _, err := other.RestoreConversation(data); !errors.Is(err, ErrSessionModel) || !strings.Contains(err.Error(), "saved with model") {
		t.Errorf("another model: %v", err)
	}
	bad := append([]byte(nil), data...)
	bad[len(sessionMagic)] = 9 // format version 9
	if _, err := b.RestoreConversation(bad); !errors.Is(err, ErrSessionModel) || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("another version: %v", err)
	}
	bad = append([]byte(nil), data...)
	bad[len(bad)-40] ^= 1
	if _, err := b.RestoreConversation(bad); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged: %v", err)
	}
	if _, err := b.RestoreConversation([]byte("hello")); err == nil {
		t.Error("garbage accepted")
	}
}

// A JSON-schema-constrained generation of the real model parses and
// validates, whatever the budget and seed.
func TestGrammarThroughEngine(t *testing.T) {
	e := openMicro(t, 0)
	schema := []byte(`{"type":"object","properties":{"name":{"type":"string"},"count":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","count","tags"]}`)
	g, err := grammar.Schema(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		max  int
		temp float32
		seed uint64
	}{{40, 0, 1}, {40, 1, 2}, {64, 1.5, 3}, {31, 1, 4}, {32, 2, 5}} {
		var out strings.Builder
		st, err := e.Generate(context.Background(), Options{Chat: &chat.Input{Messages: []chat.Message{{Role: "user", Content: chat.Text("Give me JSON.")}}}, MaxTokens: tc.max,
			Grammar: g, Sampler: generate.SamplerOptions{Temperature: tc.temp, Seed: tc.seed}}, func(p Piece) bool { out.WriteString(p.Text); return true })
		if err != nil {
			t.Fatal(err)
		}
		doc := out.String() + st.Tail
		if err := g.Validate([]byte(doc)); err != nil {
			t.Fatalf("%+v: %q: %v", tc, doc, err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Generate(context.Background(), Options{Prompt: "x", MaxTokens: 3, Grammar: g}, func(Piece) bool { return true }); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("tiny budget: %v", err)
	}
}

// Stop strings end the text before them, also across tokens.
func TestStopStrings(t *testing.T) {
	e := openMicro(t, 0)
	var full strings.Builder
	st, err := e.Generate(context.Background(), Options{Prompt: "And God said", MaxTokens: 24}, func(p Piece) bool { full.WriteString(p.Text); return true })
	if err != nil {
		t.Fatal(err)
	}
	text := full.String() + st.Tail
	if len(text) < 8 {
		t.Skipf("continuation too short: %q", text)
	}
	stop := text[5:8]
	var out strings.Builder
	st, err = e.Generate(context.Background(), Options{Prompt: "And God said", MaxTokens: 24, Stop: []string{stop}}, func(p Piece) bool { out.WriteString(p.Text); return true })
	if err != nil {
		t.Fatal(err)
	}
	got := out.String() + st.Tail
	if want := text[:strings.Index(text, stop)]; got != want || st.Stopped != "stop" {
		t.Fatalf("with stop %q: %q (%s), want %q", stop, got, st.Stopped, want)
	}
}

// newStopper drops empty stop strings (one would end every output at once).
func TestStopper(t *testing.T) {
	s := newStopper([]string{"", "END", "xy"})
	var out strings.Builder
	for _, p := range []string{"ab", "cE", "N", "x", "zE", "ND tail"} {
		o, hit := s.Push(p)
		out.WriteString(o)
		if hit {
			break
		}
	}
	if out.String() != "abcENxz" {
		t.Fatalf("%q", out.String())
	}
}

// A cancelled request stops between the pieces of a long prompt's
// prefill, not after all of it.
func TestCancelDuringPrefill(t *testing.T) {
	e := openMicro(t, 0)
	ids := make([]int, 10*e.Chunk)
	for i := range ids {
		ids[i] = (i*37 + 11) % 4000
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pieces, first := 0, -1
	_, err := e.Generate(ctx, Options{Tokens: ids, MaxTokens: 4, RouteHook: func(layer int, _ []int, T, _ int) {
		if first < 0 {
			first = layer
		}
		if layer == first {
			pieces++
			cancel()
		}
	}}, func(Piece) bool { return true })
	if !errors.Is(err, context.Canceled) || pieces != 1 {
		t.Fatalf("err %v after %d prefill pieces, want context.Canceled after 1", err, pieces)
	}
}

// A conversation with content parts (as the browser's
// engine.chat.completions.create takes it) saves and restores with its
// parts: the restored engine's next turn resumes the saved state.
func TestChatConversationSaveRestore(t *testing.T) {
	a := openMicro(t, 64<<20)
	msgs := []chat.Message{{Role: "user", Content: chat.Parts(chat.Part{Type: "text", Text: "In the "}, chat.Part{Type: "text", Text: "beginning"})}}
	chatTurn := func(e *Engine, msgs []chat.Message, n int) (string, Stats) {
		t.Helper()
		in := chat.Input{Messages: msgs}
		var out strings.Builder
		st, err := e.Generate(context.Background(), Options{Chat: &in, MaxTokens: n}, func(p Piece) bool { out.WriteString(p.Text); return true })
		if err != nil {
			t.Fatal(err)
		}
		return out.String() + st.Tail, st
	}
	reply, _ := chatTurn(a, msgs, 10)
	msgs = append(msgs, chat.Message{Role: "assistant", Content: chat.Text(reply)})
	data, err := a.SaveConversation(Conversation{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	b := openMicro(t, 64<<20)
	c, err := b.RestoreConversation(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 2 || !c.Messages[0].Content.IsParts || c.Messages[0].Content.String() != "In the beginning" {
		t.Fatalf("restored %+v", c)
	}
	_, st := chatTurn(b, append(c.Messages, chat.Message{Role: "user", Content: chat.Text("Go on.")}), 2)
	if st.CachedTokens == 0 || st.CachedTokens >= st.PromptTokens {
		t.Fatalf("resumed %d of %d prompt tokens", st.CachedTokens, st.PromptTokens)
	}
}
