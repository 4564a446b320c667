package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/tessera-llm/tessera/core/atomicfile"
	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/digest"
	"github.com/tessera-llm/tessera/core/model"
)

// Conversation is a chat whose sequence state can be saved and restored:
// the messages so far (the last one usually the assistant's reply) and
// the images they attach, in order.
type Conversation struct {
	Messages []chat.Message `json:"messages,omitempty"`
	Images   []Image        `json:"images,omitempty"`
}

// Saved conversations start with sessionMagic, then the format version
// (uint32), the model's identity hash (32 bytes), a JSON header (uint32
// length), the state's layers (uint32 count, then per layer its fixed
// values and its cache rows, each a uint32 length and that many float32)
// and a SHA-256 of everything before it.
// All integers and floats are little-endian.
const (
	sessionMagic = "TESSERA-SESSION\x00"
	// SessionVersion is the saved-conversation format version.
	SessionVersion = 2
)

// ErrSessionModel reports a saved conversation of another model or
// format version.
var ErrSessionModel = errors.New("the saved conversation does not belong to this model")

type sessionHeader struct {
	Conversation
	Key  []int `json:"key"`
	Hist []int `json:"hist"`
	Pos  int   `json:"pos"`
}

// conversationKey is the prefix-cache key and ids of a conversation as
// rendered so far (no generation prompt).
func (e *Engine) conversationKey(c Conversation) (*prepared, error) {
	in := chat.Input{Messages: c.Messages}
	if n := len(chat.Images(c.Messages)); n != len(c.Images) {
		return nil, fmt.Errorf("the messages attach %d images but %d were given", n, len(c.Images))
	}
	ids, err := e.encodeChat(in)
	if err != nil {
		return nil, err
	}
	return e.prepareImages(ids, c.Images)
}

// SaveConversation returns the conversation with the sequence state after
// it: the state the generation of its last reply left in the prefix cache.
// Without a prefix cache, or once that state was evicted, it fails.
func (e *Engine) SaveConversation(c Conversation) ([]byte, error) {
	if e.Cache == nil {
		return nil, errors.New("saving a conversation needs the prefix cache (it holds the state)")
	}
	p, err := e.conversationKey(c)
	if err != nil {
		return nil, err
	}
	snap, hist, key := e.Cache.peek(p.key)
	if snap == nil {
		return nil, errors.New("no state of this conversation is cached (evicted, or it was not generated here)")
	}
	var b bytes.Buffer
	b.WriteString(sessionMagic)
	binary.Write(&b, binary.LittleEndian, uint32(SessionVersion))
	b.Write(e.identity[:])
	hdr, err := json.Marshal(sessionHeader{Conversation: c, Key: key, Hist: hist, Pos: snap.Pos})
	if err != nil {
		return nil, err
	}
	binary.Write(&b, binary.LittleEndian, uint32(len(hdr)))
	b.Write(hdr)
	binary.Write(&b, binary.LittleEndian, uint32(len(snap.Fixed)))
	var f [4]byte
	for i := range snap.Fixed {
		for _, part := range [][]float32{snap.Fixed[i], snap.Cache[i]} {
			binary.Write(&b, binary.LittleEndian, uint32(len(part)))
			for _, v := range part {
				binary.LittleEndian.PutUint32(f[:], math.Float32bits(v))
				b.Write(f[:])
			}
		}
	}
	sum := digest.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), nil
}

// RestoreConversation reads a saved conversation and puts its state in the
// prefix cache, so the next generation that continues it prefills only
// the new message. It refuses data of another model or format version,
// and damaged data, saying which.
func (e *Engine) RestoreConversation(data []byte) (Conversation, error) {
	var c Conversation
	if e.Cache == nil {
		return c, errors.New("restoring a conversation needs the prefix cache (it holds the state)")
	}
	if len(data) < len(sessionMagic)+4+32+4+32 || string(data[:len(sessionMagic)]) != sessionMagic {
		return c, errors.New("not a saved tessera conversation")
	}
	body, sum := data[:len(data)-32], data[len(data)-32:]
	r := bytes.NewReader(body[len(sessionMagic):])
	var ver uint32
	binary.Read(r, binary.LittleEndian, &ver)
	if ver != SessionVersion {
		return c, fmt.Errorf("%w: it has format version %d, this tessera reads version %d", ErrSessionModel, ver, SessionVersion)
	}
	var id [32]byte
	r.Read(id[:])
	if id != e.identity {
		return c, fmt.Errorf("%w: it was saved with model %s…, this is model %s…", ErrSessionModel,
			hex.EncodeToString(id[:6]), hex.EncodeToString(e.identity[:6]))
	}
	if got := digest.Sum256(body); !bytes.Equal(got[:], sum) {
		return c, errors.New("the saved conversation is damaged (checksum mismatch)")
	}
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil || int64(n) > int64(r.Len()) {
		return c, errors.New("the saved conversation is truncated")
	}
	hb := make([]byte, n)
	r.Read(hb)
	var h sessionHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return c, fmt.Errorf("the saved conversation's header: %w", err)
	}
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil || int(n) != len(e.Model.Layers) {
		return c, fmt.Errorf("%w: its state has %d layers, the model %d", ErrSessionModel, n, len(e.Model.Layers))
	}
	snap := &model.Snapshot{Pos: h.Pos, Fixed: make([][]float32, n), Cache: make([][]float32, n)}
	for i := range snap.Fixed {
		for _, part := range []*[]float32{&snap.Fixed[i], &snap.Cache[i]} {
			var m uint32
			if err := binary.Read(r, binary.LittleEndian, &m); err != nil || int64(m)*4 > int64(r.Len()) {
				return c, errors.New("the saved conversation is truncated")
			}
			l := make([]float32, m)
			binary.Read(r, binary.LittleEndian, l)
			*part = l
		}
	}
	if err := e.Model.NewState().CheckSnapshot(snap); err != nil {
		return c, fmt.Errorf("%w: %v", ErrSessionModel, err)
	}
	if len(h.Hist) != h.Pos || len(h.Key) != h.Pos {
		return c, errors.New("the saved conversation's header does not match its state")
	}
	e.Cache.Put(h.Key, h.Hist, snap)
	return h.Conversation, nil
}

// SaveConversationFile writes SaveConversation's bytes to path atomically
// (a temporary file next to it, renamed into place).
func (e *Engine) SaveConversationFile(path string, c Conversation) error {
	b, err := e.SaveConversation(c)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path, 0o644, b); err != nil {
		return fmt.Errorf("saving the conversation to %s: %w", path, err)
	}
	return nil
}

// LoadConversationFile is RestoreConversation of a file.
func (e *Engine) LoadConversationFile(path string) (Conversation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Conversation{}, err
	}
	c, err := e.RestoreConversation(b)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
