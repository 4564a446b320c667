package desk

import (
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/core/tokenizer"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
)

// Settings are the user's generation settings.
type Settings struct {
	Sampler   generate.SamplerOptions
	MaxTokens int
}

// Controller runs one generation at a time on a Backend in a goroutine and
// keeps what the UI shows: the streamed text and timing.
type Controller struct {
	b     Backend
	codec tokenizer.Codec
	live  *engine.LiveView
	stops []int

	mu        sync.Mutex
	running   bool
	stop      atomic.Bool
	done      chan struct{}
	text      strings.Builder
	version   int // bumped whenever text changes
	prompt    int // prompt tokens of the current run
	generated int
	started   time.Time
	first     time.Time // first token
	lastTok   time.Time
	finished  time.Time
	err       error
	stopped   bool
	runs      int
}

// NewController prepares a Controller; stops are the model's EOS ids.
func NewController(b Backend, codec tokenizer.Codec, live *engine.LiveView, stops []int) *Controller {
	c := &Controller{b: b, codec: codec, live: live, stops: stops, done: make(chan struct{})}
	close(c.done)
	return c
}

// ErrBusy is returned by Start while a generation runs.
var ErrBusy = errors.New("a generation is already running; press Esc or Stop first")

// Start encodes prompt (after one media placeholder per image) and starts
// generating in the background.
func (c *Controller) Start(prompt string, images [][]byte, s Settings) error {
	if err := s.Sampler.Validate(); err != nil {
		return err
	}
	if s.MaxTokens < 0 {
		return fmt.Errorf("max tokens %d: want ≥ 0", s.MaxTokens)
	}
	if prompt == "" {
		return errors.New("the prompt is empty: type something first")
	}
	ids, err := c.codec.Encode(prompt)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("the prompt %q encodes to no tokens", prompt)
	}
	if len(images) > 0 && !c.b.Vision() {
		return errors.New("this model has no vision tower: it cannot take images")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return ErrBusy
	}
	c.running, c.err, c.stopped = true, nil, false
	c.stop.Store(false)
	c.text.Reset()
	c.version++
	c.prompt, c.generated = len(ids), 0
	c.started, c.first, c.lastTok, c.finished = time.Now(), time.Time{}, time.Time{}, time.Time{}
	c.runs++
	c.done = make(chan struct{})
	c.live.Reset()
	opt := generate.Options{Sampler: s.Sampler, MaxTokens: s.MaxTokens, Stop: c.stops, Vocab: c.codec.Vocab()}
	go c.run(ids, images, opt, c.done)
	return nil
}

// run is the generating goroutine.
func (c *Controller) run(ids []int, images [][]byte, opt generate.Options, done chan struct{}) {
	defer close(done)
	stream := c.codec.Stream()
	var err error
	for tok, e := range c.b.Generate(ids, images, opt, c.live) {
		if e != nil {
			err = e
			break
		}
		piece, e := stream.Add(tok)
		if e != nil {
			err = fmt.Errorf("decoding token %d: %w", tok, e)
			break
		}
		now := time.Now()
		c.mu.Lock()
		if c.generated == 0 {
			c.first = now
		}
		c.generated++
		c.lastTok = now
		c.text.WriteString(piece)
		c.version++
		c.mu.Unlock()
		if c.stop.Load() {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if tail := stream.Flush(); tail != "" {
		c.text.WriteString(tail)
		c.version++
	}
	c.err, c.stopped = err, c.stop.Load()
	c.finished = time.Now()
	c.running = false
}

// Stop asks the running generation to stop after the current token.
func (c *Controller) Stop() {
	c.stop.Store(true)
}

// Wait blocks until the current generation (if any) has finished.
func (c *Controller) Wait() {
	c.mu.Lock()
	d := c.done
	c.mu.Unlock()
	<-d
}

// Status is what the UI shows about the current or last generation.
type Status struct {
	Running   bool
	Runs      int
	Text      string
	Version   int
	Prompt    int
	Generated int
	TTFT      time.Duration // 0 until the first token
	TokPerSec float64       // decode rate after the first token
	Elapsed   time.Duration
	Err       error
	Stopped   bool
}

// Status returns a copy of the generation's status. The text is copied
// only when it changed since version have.
func (c *Controller) Status(have int) Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Running: c.running, Runs: c.runs, Version: c.version, Prompt: c.prompt,
		Generated: c.generated, Err: c.err, Stopped: c.stopped}
	if have != c.version {
		s.Text = c.text.String()
	}
	end := c.finished
	if c.running || end.IsZero() {
		end = time.Now()
	}
	if c.runs > 0 {
		s.Elapsed = end.Sub(c.started)
	}
	if !c.first.IsZero() {
		s.TTFT = c.first.Sub(c.started)
		if c.generated > 1 {
			if d := c.lastTok.Sub(c.first); d > 0 {
				s.TokPerSec = float64(c.generated-1) / d.Seconds()
			}
		} else if s.TTFT > 0 {
			s.TokPerSec = 1 / s.TTFT.Seconds()
		}
	}
	return s
}

// Output is the generated text as `tessera run` prints it: the streamed
// pieces, what the decoder held back, and a final newline.
func (c *Controller) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.text.String() + "\n"
}
