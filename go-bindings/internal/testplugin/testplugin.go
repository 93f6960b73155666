// SPDX-License-Identifier: Apache-2.0

// Package testplugin locates the built plugin library for tests.
package testplugin

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Path returns $RKNP_PLUGIN, else build/lib/librknp.so.1 of this checkout.
// It skips only when neither is available, so CI (which sets RKNP_PLUGIN)
// never skips silently.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("RKNP_PLUGIN"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0) // go-bindings/internal/testplugin/testplugin.go
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "build", "lib", "librknp.so.1")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("RKNP_PLUGIN unset and %s missing", p)
	}
	return p
}
