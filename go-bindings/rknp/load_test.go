// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestOpenMissingFile(t *testing.T) {
	_, err := Open("/nonexistent/librknp.so.1")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want ErrNotExist, got %v", err)
	}
}

func TestOpenNotAPlugin(t *testing.T) {
	// libc loads fine but has no rknp_get_api.
	_, err := Open("libc.so.6")
	if !errors.Is(err, ErrNotPlugin) {
		t.Fatalf("want ErrNotPlugin, got %v", err)
	}
}

func TestOpenNotELF(t *testing.T) {
	_, err := Open("/proc/self/status")
	if err == nil || !strings.Contains(err.Error(), "/proc/self/status") {
		t.Fatalf("want a dlopen error naming the file, got %v", err)
	}
}

func TestOpenWrongMajor(t *testing.T) {
	_, err := openMajor(pluginPath(t), 99)
	if !errors.Is(err, ErrABIMajor) {
		t.Fatalf("want ErrABIMajor, got %v", err)
	}
}

func TestOpenFakeWrongMajor(t *testing.T) {
	_, err := openMajor(fakePlugin(t, 512), 2)
	if !errors.Is(err, ErrABIMajor) {
		t.Fatalf("want ErrABIMajor, got %v", err)
	}
}

func TestOpenTableTooSmall(t *testing.T) {
	_, err := Open(fakePlugin(t, 16))
	if !errors.Is(err, ErrTableTooSmall) {
		t.Fatalf("want ErrTableTooSmall, got %v", err)
	}
}

func TestOpenEmptyPathUnlinked(t *testing.T) {
	if _, err := Linked(); err == nil {
		t.Skip("built with rknp_link")
	}
	if _, err := Open(""); err == nil {
		t.Fatal("Open(\"\") without rknp_link must fail")
	}
}

func TestVersion(t *testing.T) {
	l := openPlugin(t)
	major, _ := l.ABIVersion()
	if major != ABIMajor {
		t.Fatalf("abi major %d, want %d", major, ABIMajor)
	}
	if l.Version() == "" {
		t.Fatal("empty library version")
	}
	if l2, _ := Open(l.Path()); l2 != l {
		t.Fatal("second Open of the same path must return the same Library")
	}
	t.Logf("library %s, abi %d", l.Version(), major)
}
