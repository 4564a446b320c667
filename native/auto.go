package native

import (
	"os"

	"github.com/tessera-llm/tessera/wgsl"
)

// ChooseAuto is backend "auto"'s decision (wgsl.ChooseAuto) for the
// adapter of d, a device from Open: a software adapter is taken only when
// TESSERA_AUTO_SOFTWARE_GPU=1 (wgsl.AutoSoftwareEnv).
func ChooseAuto(d *wgsl.Device) wgsl.AutoChoice {
	return wgsl.ChooseAuto(d.Adapter(), os.Getenv(wgsl.AutoSoftwareEnv) == "1")
}
