// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"github.com/rknp/rknp/go-bindings/internal/testplugin"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func pluginPath(t *testing.T) string { return testplugin.Path(t) }

func openPlugin(t *testing.T) *Library {
	t.Helper()
	l, err := Open(pluginPath(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fakePlugin compiles a library whose rknp_get_api answers major 1 with a
// table of tableSize bytes (and NULL for other majors).
func fakePlugin(t *testing.T, tableSize int) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "fake.c")
	code := `#include <stdint.h>
static uint32_t table[64] = { SIZE, 1, 0, 0 };
const void *rknp_get_api(uint32_t major) { return major == 1 ? table : 0; }
`
	code = strings.Replace(code, "SIZE", strconv.Itoa(tableSize), 1)
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "libfake.so")
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("compiling fake plugin: %v: %s", err, b)
	}
	return out
}

// countFDs is the number of open file descriptors of this process.
func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
