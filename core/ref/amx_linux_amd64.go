//go:build !purego

package ref

import "syscall"

// amxPermit asks Linux for this process's permission to use the AMX tile
// data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux 5.16
// and later); false when refused or unknown.
func amxPermit() bool {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
