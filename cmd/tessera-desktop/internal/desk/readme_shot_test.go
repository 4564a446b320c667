package desk

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readmeShot is the README's picture of the app. `make desktop-screenshot`
// (TESSERA_DESKTOP_README=write) writes it from TestScriptedUnderXvfb's
// "readme" case and stamps it with the hash of the app's sources, which
// TestReadmeScreenshotIsCurrent checks.
const readmeShot = "../../screenshot.png"

// appDir is the desktop app's source tree, from this package.
const appDir = "../.."

// shotKeyword is the PNG tEXt keyword of the stamp.
const shotKeyword = "tessera-desktop-sources"

// appSourcesHash is the sha256 of every file under cmd/tessera-desktop but
// tests and the screenshot itself, with their paths: what can change what
// the window shows.
func appSourcesHash() (string, error) {
	var files []string
	err := filepath.WalkDir(appDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, "_test.go") || filepath.Clean(p) == filepath.Clean(readmeShot) {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("listing the app's sources: %w", err)
	}
	slices.Sort(files)
	h := sha256.New()
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(appDir, p)
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pngChunk encodes one PNG chunk.
func pngChunk(typ string, data []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	out = append(out, typ...)
	out = append(out, data...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// stampPNG returns png with a tEXt chunk keyword=value after its header.
func stampPNG(png []byte, keyword, value string) ([]byte, error) {
	const ihdrEnd = 8 + 8 + 13 + 4 // signature, IHDR length+type, data, CRC
	if len(png) < ihdrEnd || string(png[12:16]) != "IHDR" {
		return nil, errors.New("not a PNG with an IHDR chunk first")
	}
	out := slices.Clone(png[:ihdrEnd])
	out = append(out, pngChunk("tEXt", []byte(keyword+"\x00"+value))...)
	return append(out, png[ihdrEnd:]...), nil
}

// pngText returns the value of the tEXt chunk keyword, or "".
func pngText(png []byte, keyword string) string {
	for i := 8; i+8 <= len(png); {
		n := int(binary.BigEndian.Uint32(png[i:]))
		typ := string(png[i+4 : i+8])
		if i+12+n > len(png) {
			return ""
		}
		if typ == "tEXt" {
			if k, v, ok := bytes.Cut(png[i+8:i+8+n], []byte{0}); ok && string(k) == keyword {
				return string(v)
			}
		}
		if typ == "IDAT" {
			return ""
		}
		i += 12 + n
	}
	return ""
}

// writeReadmeShot stamps the screenshot at shot and writes it as the
// README's picture.
func writeReadmeShot(t *testing.T, shot string) {
	t.Helper()
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := appSourcesHash()
	if err != nil {
		t.Fatal(err)
	}
	if data, err = stampPNG(data, shotKeyword, sum); err != nil {
		t.Fatalf("%s: %v", shot, err)
	}
	if err := os.WriteFile(readmeShot, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote cmd/tessera-desktop/screenshot.png (sources %s)", sum[:12])
}

// TestReadmeScreenshotIsCurrent fails when the README's screenshot was not
// made from the app's current sources, so it cannot drift from the app.
func TestReadmeScreenshotIsCurrent(t *testing.T) {
	if os.Getenv("TESSERA_DESKTOP_README") == "write" {
		t.Skip("TESSERA_DESKTOP_README=write: the Xvfb test is rewriting the screenshot")
	}
	data, err := os.ReadFile(readmeShot)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := appSourcesHash()
	if err != nil {
		t.Fatal(err)
	}
	if got := pngText(data, shotKeyword); got != sum {
		t.Errorf("cmd/tessera-desktop/screenshot.png was not made from the app's current sources (stamp %q, sources %s): "+
			"run `make desktop-screenshot` and commit the new picture", got, sum)
	}
}

// TestStampPNG checks the stamp survives a round trip and a PNG decoder.
func TestStampPNG(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "images", "gray.png"))
	if err != nil {
		t.Fatal(err)
	}
	if pngText(data, shotKeyword) != "" {
		t.Fatal("unstamped PNG has a stamp")
	}
	st, err := stampPNG(data, shotKeyword, "abc")
	if err != nil {
		t.Fatal(err)
	}
	if got := pngText(st, shotKeyword); got != "abc" {
		t.Errorf("stamp read back as %q", got)
	}
	if _, err := png.Decode(bytes.NewReader(st)); err != nil {
		t.Errorf("stamped PNG does not decode: %v", err)
	}
	if _, err := stampPNG([]byte("GIF89a"), shotKeyword, "x"); err == nil {
		t.Error("stamping a GIF succeeded")
	}
}
