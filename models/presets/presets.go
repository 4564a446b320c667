// Package presets embeds the named model configurations ("distilled/scaled
// configurations" of the K3 class) that `tessera init-random` and the
// benchmarks use.
package presets

import (
	"embed"
	"fmt"
	"os"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// Names lists the presets.
func Names() []string {
	ents, _ := files.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

// Read returns the config.json bytes of a preset name, or of a file path
// when arg is not a preset name.
func Read(arg string) ([]byte, error) {
	if b, err := files.ReadFile(arg + ".json"); err == nil {
		return b, nil
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("config %q is neither a preset (%s) nor a readable file: %w", arg, strings.Join(Names(), ", "), err)
	}
	return b, nil
}
