package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

// chatPage drives engine.chat.completions.create for one model (the
// spec's "models"): non-stream, stream (with usage), the generate API on
// the prompt the Go test rendered, a stop sequence, an image and bad
// requests; it posts what it saw.
const chatPage = `<!doctype html><meta charset="utf-8"><title>chat API test</title><script type="module">
import { Tessera, ChatCompletionError } from '/tessera.js';
const post = (r) => fetch('/__test/report', { method: 'POST', body: JSON.stringify(r) });
const errOf = (e) => ({ name: e.name, message: e.message, status: e.status, error: e.error, param: e.param, isChatError: e instanceof ChatCompletionError });
try {
  const spec = await (await fetch('/__test/spec')).json();
  const out = {};
  for (const m of spec.models) {
    const engine = await Tessera.load(m.url, { cacheName: '' });
    const base = { model: 'k3-micro', messages: spec.messages, max_tokens: spec.maxTokens, temperature: 0 };
    const r = { chatTemplate: (await engine.info()).chatTemplate };
    r.plain = await engine.chat.completions.create(base);
    r.chunks = [];
    for await (const c of await engine.chat.completions.create({ ...base, stream: true, stream_options: { include_usage: true } })) r.chunks.push(c);
    r.generate = [];
    for await (const p of engine.generate(m.prompt, { maxTokens: spec.maxTokens, temperature: 0 })) r.generate.push(p);
    // logit bias: the first greedy token banned (generate), forced (chat), a bad key
    const ban = r.generate[0].id;
    r.biased = [];
    for await (const p of engine.generate(m.prompt, { maxTokens: 4, temperature: 0, logitBias: { [ban]: -100 } })) r.biased.push(p);
    r.forced = await engine.chat.completions.create({ ...base, max_tokens: 3, logit_bias: { [ban]: 100 } });
    try { for await (const p of engine.generate(m.prompt, { maxTokens: 2, logitBias: { x: 1 } })) {} r.badBias = ''; } catch (e) { r.badBias = e.message; }
    const text = r.plain.choices[0].message.content;
    if (text.length >= 4) {
      r.stopSeq = text.slice(2, 4);
      r.stopped = await engine.chat.completions.create({ ...base, stop: [r.stopSeq] });
      r.stopChunks = [];
      for await (const c of await engine.chat.completions.create({ ...base, stop: r.stopSeq, stream: true })) r.stopChunks.push(c);
    }
    r.image = await engine.chat.completions.create({ ...base, max_tokens: 2, messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: spec.imageURL } }, { type: 'text', text: 'What is this?' }] }] });
    // log-probabilities (non-stream and per chunk) and a JSON response format
    const lp = { ...base, max_tokens: 4, logprobs: true, top_logprobs: 2 };
    r.logprobs = await engine.chat.completions.create(lp);
    r.logprobChunks = [];
    for await (const c of await engine.chat.completions.create({ ...lp, stream: true })) r.logprobChunks.push(c);
    r.json = await engine.chat.completions.create({ ...base, max_tokens: 24, temperature: 1, seed: 2, response_format: { type: 'json_object' } });
    r.errors = {};
    const bad = { temperature: { ...base, temperature: 5 }, unknown: { ...base, frobnicate: 1 }, empty: { ...base, messages: [] },
      badImage: { ...base, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] },
      streamBad: { ...base, stream: true, n: 3 } };
    for (const [k, p] of Object.entries(bad)) {
      try { await engine.chat.completions.create(p); r.errors[k] = null; } catch (e) { r.errors[k] = errOf(e); }
    }
    // aborting a stream ends it after a few chunks
    const ac = new AbortController();
    let n = 0;
    for await (const c of await engine.chat.completions.create({ ...base, max_tokens: 64, stream: true }, { signal: ac.signal })) {
      if (++n === 3) ac.abort();
    }
    r.abortedChunks = n;
    r.afterAbort = await engine.chat.completions.create(base);
    // a saved conversation: kept in OPFS, restored into a new engine, whose
    // next turn resumes from the saved state instead of prefilling it
    const conv = [...spec.messages, { role: 'assistant', content: r.plain.choices[0].message.content }];
    r.saved = await engine.saveSession('e2e-' + m.name, conv);
    engine.dispose();
    const again = await Tessera.load(m.url, { cacheName: '' });
    r.restored = await again.restoreSession('e2e-' + m.name);
    r.resumed = await again.chat.completions.create({ ...base, max_tokens: 2, messages: [...conv, { role: 'user', content: 'And then?' }] });
    try { await again.restoreSession('none-such'); r.missingSession = ''; } catch (e) { r.missingSession = e.message; }
    await again.deleteSession('e2e-' + m.name);
    again.dispose();
    out[m.name] = r;
  }
  await post({ ok: true, results: out });
} catch (e) {
  await post({ ok: false, error: String(e && e.stack || e) });
}
</script>`

type chatChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string       `json:"finish_reason"`
		Logprobs     *chatLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

type chatLogprobs struct {
	Content []chat.TokenLogprob `json:"content"`
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type chatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string        `json:"finish_reason"`
		Logprobs     *chatLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage chatUsage `json:"usage"`
}

type chatReport struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Results map[string]struct {
		ChatTemplate string         `json:"chatTemplate"`
		Plain        chatCompletion `json:"plain"`
		Chunks       []chatChunk    `json:"chunks"`
		Generate     []struct {
			ID   int    `json:"id"`
			Text string `json:"text"`
		} `json:"generate"`
		Biased []struct {
			ID   int    `json:"id"`
			Text string `json:"text"`
		} `json:"biased"`
		Forced        chatCompletion `json:"forced"`
		BadBias       string         `json:"badBias"`
		StopSeq       string         `json:"stopSeq"`
		Stopped       chatCompletion `json:"stopped"`
		StopChunks    []chatChunk    `json:"stopChunks"`
		Image         chatCompletion `json:"image"`
		AbortedChunks int            `json:"abortedChunks"`
		AfterAbort    chatCompletion `json:"afterAbort"`
		Saved         struct {
			Bytes int `json:"bytes"`
		} `json:"saved"`
		Restored struct {
			Messages []json.RawMessage `json:"messages"`
		} `json:"restored"`
		Resumed        chatCompletion `json:"resumed"`
		MissingSession string         `json:"missingSession"`
		Logprobs       chatCompletion `json:"logprobs"`
		LogprobChunks  []chatChunk    `json:"logprobChunks"`
		JSON           chatCompletion `json:"json"`
		Errors         map[string]*struct {
			Name        string `json:"name"`
			Message     string `json:"message"`
			Status      int    `json:"status"`
			Param       string `json:"param"`
			IsChatError bool   `json:"isChatError"`
			Error       struct {
				Type string `json:"type"`
			} `json:"error"`
		} `json:"errors"`
	} `json:"results"`
}

// TestBrowserChatAPI runs engine.chat.completions.create in headless
// Chromium on the bundled k3-micro, as shipped (no chat template: the
// built-in Kimi format) and with the published Kimi-K2 template in its
// tokenizer_config.json: greedy non-stream and stream replies equal the
// generate API's tokens on the prompt core/chat renders (up to the first
// stop token), chunks have OpenAI's shape, stop sequences cut the reply,
// an image_url data: URL is accepted, and bad requests reject with
// OpenAI-shaped errors. Without Chromium it skips, except under CI=true.
func TestBrowserChatAPI(tt *testing.T) {
	t := withRecap(tt)
	chrome := requireChromium(t)
	start := time.Now()
	dir := t.TempDir()
	wasmDir := filepath.Join(dir, "wasm")
	e2eBuildWasm(t, wasmDir)

	// k3-micro as shipped, and a copy with Kimi-K2's chat template.
	src := filepath.Join("..", "..", "models", "k3-micro")
	plainDir, tmplDir := filepath.Join(dir, "plain"), filepath.Join(dir, "tmpl")
	for _, d := range []string{plainDir, tmplDir} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		for _, f := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(d, f), b, 0o644))
		}
	}
	k2, err := os.ReadFile(filepath.Join("..", "..", "testdata", "chat", "templates", "moonshotai-Kimi-K2.jinja"))
	require.NoError(t, err)
	cfg, err := json.Marshal(map[string]any{"chat_template": string(k2), "eos_token": "<|im_end|>"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmplDir, "tokenizer_config.json"), cfg, 0o644))
	for _, d := range []string{plainDir, tmplDir} {
		e2eRun(t, "manifest", "--model", d)
	}

	// No system message: the built-in format and the template insert
	// different default system prompts, so the two prompts differ.
	messages := []chat.Message{
		{Role: "user", Content: chat.Parts(chat.Part{Type: "text", Text: "Name three "}, chat.Part{Type: "text", Text: "colours."})},
	}
	imageMessages := []chat.Message{{Role: "user", Content: chat.Parts(chat.Part{Type: "image_url", ImageURL: &chat.ImageURL{URL: "data:"}},
		chat.Part{Type: "text", Text: "What is this?"})}}
	const maxTok = 24
	type modelSpec struct {
		Name   string `json:"name"`
		URL    string `json:"url"`
		Prompt string `json:"prompt"`
		stops  []int
		source string
		// imagePrompt: prompt tokens of the image request (text tokens,
		// the placeholder expanded to the image's tokens)
		imagePrompt int
	}
	var models []modelSpec
	for _, m := range []struct{ name, dir string }{{"plain", plainDir}, {"tmpl", tmplDir}} {
		rd, err := chat.ForModel(m.dir)
		require.NoError(t, err)
		prompt, err := rd.Render(chat.Input{Messages: messages, AddGenerationPrompt: true})
		require.NoError(t, err)
		mm, ck, err := model.OpenDir(m.dir)
		require.NoError(t, err)
		codec, err := tokenizer.LoadCodec(m.dir, mm.Cfg.VocabSize)
		require.NoError(t, err)
		imgText, err := rd.Render(chat.Input{Messages: imageMessages, AddGenerationPrompt: true})
		require.NoError(t, err)
		imgIDs, err := codec.Encode(imgText)
		require.NoError(t, err)
		require.Equal(t, 1, countID(imgIDs, mm.Cfg.MediaPlaceholderTokenID), imgText)
		imgTok, err := mm.VisionCfg.TokensPerImage(50, 30) // gray.png is 30×50
		require.NoError(t, err)
		models = append(models, modelSpec{Name: m.name, URL: "/" + m.name + "/", Prompt: prompt,
			stops: rd.StopTokens(codec, mm.Cfg.EOSTokenIDs), source: rd.Source, imagePrompt: len(imgIDs) - 1 + imgTok})
		ck.Close()
	}
	require.Equal(t, chat.BuiltinSource, models[0].source)
	require.Equal(t, "tokenizer_config.json", models[1].source)
	require.NotEqual(t, models[0].Prompt, models[1].Prompt)
	png, err := os.ReadFile(testImage("gray.png"))
	require.NoError(t, err)
	spec, err := json.Marshal(map[string]any{"models": models, "messages": messages, "maxTokens": maxTok,
		"imageURL": "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)})
	require.NoError(t, err)

	var logBuf syncBuffer
	mux := http.NewServeMux()
	srvs := map[string]http.Handler{}
	for _, m := range []struct{ name, dir string }{{"plain", plainDir}, {"tmpl", tmplDir}} {
		s, err := newServer(serveConfig{ModelDir: m.dir, WasmDir: wasmDir, Loopback: true, Log: &logBuf})
		require.NoError(t, err)
		defer s.Close()
		srvs[m.name] = s
		mux.HandleFunc("/"+m.name+"/", func(w http.ResponseWriter, r *http.Request) {
			r.URL.Path = "/model/" + strings.TrimPrefix(r.URL.Path, "/"+m.name+"/")
			s.ServeHTTP(w, r)
		})
	}
	reports := make(chan chatReport, 1)
	mux.HandleFunc("POST /__test/report", func(w http.ResponseWriter, r *http.Request) {
		var rep chatReport
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&rep); err != nil {
			rep = chatReport{Error: "bad report: " + err.Error()}
		}
		reports <- rep
	})
	mux.HandleFunc("GET /__test/spec", func(w http.ResponseWriter, r *http.Request) { w.Write(spec) })
	mux.HandleFunc("GET /__test/chat.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, chatPage)
	})
	mux.Handle("/", srvs["plain"]) // the page's scripts and the wasm bundle
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := newHTTPServer(mux)
	go hs.Serve(ln)
	defer hs.Close()

	b := startChromium(t, chrome, dir)
	defer b.close()
	page, err := b.attachPage()
	require.NoError(t, err)
	_, err = b.call(page, "Runtime.enable", nil)
	require.NoError(t, err)
	_, err = b.call(page, "Page.navigate", map[string]any{"url": "http://" + ln.Addr().String() + "/__test/chat.html"})
	require.NoError(t, err)
	var rep chatReport
	select {
	case rep = <-reports:
	case err := <-b.died:
		t.Fatalf("chromium exited early: %v\nstderr:\n%s", err, b.stderr.String())
	case <-time.After(180 * time.Second):
		t.Fatalf("no report from the page after 180 s\nconsole:\n%s", b.consoleText())
	}
	if !rep.OK {
		t.Fatalf("page failed: %s\nconsole:\n%s\nserver log:\n%s", rep.Error, b.consoleText(), logBuf.String())
	}

	for _, m := range models {
		r, ok := rep.Results[m.Name]
		require.True(t, ok, m.Name)
		t.Run(m.Name, func(t *testing.T) {
			// The generate API's greedy tokens on the rendered prompt, up to
			// the first stop token, are the chat reply.
			var want strings.Builder
			n, finish := 0, "length"
			for _, p := range r.Generate {
				if slices.Contains(m.stops, p.ID) {
					finish = "stop"
					break
				}
				want.WriteString(p.Text)
				n++
			}
			if n == len(r.Generate) && len(r.Generate) < maxTok {
				finish = "stop" // generate stopped at an eos id
			}
			assert.Equal(t, m.source, r.ChatTemplate, "info().chatTemplate")
			p := r.Plain
			require.Len(t, p.Choices, 1)
			assert.Equal(t, "chat.completion", p.Object)
			assert.True(t, strings.HasPrefix(p.ID, "chatcmpl-"), p.ID)
			assert.Equal(t, "k3-micro", p.Model)
			assert.Equal(t, "assistant", p.Choices[0].Message.Role)
			assert.Equal(t, want.String(), p.Choices[0].Message.Content, "chat reply vs generate on the rendered prompt")
			assert.Equal(t, n, p.Usage.CompletionTokens)
			assert.Equal(t, finish, p.Choices[0].FinishReason)
			assert.Equal(t, p.Usage.PromptTokens+p.Usage.CompletionTokens, p.Usage.TotalTokens)
			assert.Positive(t, p.Usage.PromptTokens)

			// Stream: role first, content deltas, finish_reason, then usage.
			cs := r.Chunks
			require.GreaterOrEqual(t, len(cs), 3)
			var text strings.Builder
			for i, c := range cs {
				assert.Equal(t, "chat.completion.chunk", c.Object)
				assert.Equal(t, cs[0].ID, c.ID)
				if i == len(cs)-1 {
					require.Empty(t, c.Choices, "the usage chunk has no choices")
					require.NotNil(t, c.Usage)
					// the same counts; the stream, asked second, may resume
					// part of its prompt from the prefix cache
					u := *c.Usage
					assert.LessOrEqual(t, u.PromptTokensDetails.CachedTokens, u.PromptTokens)
					u.PromptTokensDetails = p.Usage.PromptTokensDetails
					assert.Equal(t, p.Usage, u)
					continue
				}
				require.Len(t, c.Choices, 1)
				assert.Nil(t, c.Usage)
				d := c.Choices[0]
				if i == 0 {
					require.NotNil(t, d.Delta.Role)
					assert.Equal(t, "assistant", *d.Delta.Role)
				}
				if d.Delta.Content != nil {
					text.WriteString(*d.Delta.Content)
				}
				if i == len(cs)-2 {
					require.NotNil(t, d.FinishReason)
					assert.Equal(t, finish, *d.FinishReason)
				} else {
					assert.Nil(t, d.FinishReason)
				}
			}
			assert.Equal(t, want.String(), text.String(), "stream vs non-stream")

			// A stop sequence cuts the reply before it.
			if r.StopSeq != "" {
				cut := want.String()[:strings.Index(want.String(), r.StopSeq)]
				assert.Equal(t, cut, r.Stopped.Choices[0].Message.Content)
				assert.Equal(t, "stop", r.Stopped.Choices[0].FinishReason)
				var st strings.Builder
				for _, c := range r.StopChunks {
					if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
						st.WriteString(*c.Choices[0].Delta.Content)
					}
				}
				assert.Equal(t, cut, st.String())
			}
			// logitBias: the banned first token is not picked; logit_bias
			// +100 makes the reply that token three times; a bad key is named
			if assert.NotEmpty(t, r.Biased) {
				assert.NotEqual(t, r.Generate[0].ID, r.Biased[0].ID, "logitBias -100 on the first greedy token")
			}
			assert.Equal(t, strings.Repeat(r.Generate[0].Text, 3), r.Forced.Choices[0].Message.Content, "logit_bias +100")
			assert.Contains(t, r.BadBias, `logitBias key "x" is not a token id`)
			// An image part (data: URL) is placed by the template and costs
			// its image tokens.
			require.Len(t, r.Image.Choices, 1)
			assert.Equal(t, m.imagePrompt, r.Image.Usage.PromptTokens)
			// Bad requests reject with OpenAI-shaped errors.
			for k, want := range map[string]struct {
				status int
				param  string
			}{"temperature": {400, "temperature"}, "unknown": {400, "frobnicate"}, "empty": {400, "messages"},
				"badImage": {400, "messages[0].content[0]"}, "streamBad": {400, "n"}} {
				e := r.Errors[k]
				if assert.NotNil(t, e, k) {
					assert.True(t, e.IsChatError, k)
					assert.Equal(t, want.status, e.Status, k)
					assert.Equal(t, want.param, e.Param, k)
					assert.Equal(t, "invalid_request_error", e.Error.Type, k)
					assert.Equal(t, "ChatCompletionError", e.Name, k)
				}
			}
			// logprobs: one entry per token with its top_logprobs, the same
			// streamed (one per chunk); json_object: a JSON object
			require.NotNil(t, r.Logprobs.Choices[0].Logprobs)
			lps := r.Logprobs.Choices[0].Logprobs.Content
			assert.Len(t, lps, r.Logprobs.Usage.CompletionTokens)
			for _, lp := range lps {
				assert.Len(t, lp.TopLogprobs, 2)
				assert.LessOrEqual(t, lp.Logprob, float32(0))
			}
			var streamed []chat.TokenLogprob
			for _, c := range r.LogprobChunks {
				if len(c.Choices) > 0 && c.Choices[0].Logprobs != nil {
					streamed = append(streamed, c.Choices[0].Logprobs.Content...)
				}
			}
			assert.Equal(t, lps, streamed, "streamed logprobs")
			assert.Nil(t, p.Choices[0].Logprobs, "no logprobs unless asked")
			var obj map[string]any
			assert.NoError(t, json.Unmarshal([]byte(r.JSON.Choices[0].Message.Content), &obj), "json_object: %q", r.JSON.Choices[0].Message.Content)
			assert.Equal(t, 3, r.AbortedChunks, "abort ends the stream at once: no chunk after it, not even ones already queued")
			assert.Equal(t, p.Choices[0].Message.Content, r.AfterAbort.Choices[0].Message.Content, "the engine works after an abort")
			// The saved conversation: restored in a new engine, its next turn
			// resumes at least the first turn's prompt from the saved state.
			assert.Positive(t, r.Saved.Bytes, "saveSession wrote nothing")
			assert.Len(t, r.Restored.Messages, len(messages)+1, "restoreSession gives back the saved messages")
			assert.GreaterOrEqual(t, r.Resumed.Usage.PromptTokensDetails.CachedTokens, p.Usage.PromptTokens,
				"the turn after a restore prefilled what the saved state holds (usage %+v)", r.Resumed.Usage)
			assert.Contains(t, r.MissingSession, "no saved session named")
			t.Logf("%s: %q (%d tokens, %s); image prompt %d tokens", m.Name, p.Choices[0].Message.Content, n, finish, r.Image.Usage.PromptTokens)
		})
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

func countID(ids []int, id int) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}
