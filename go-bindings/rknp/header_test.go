// SPDX-License-Identifier: Apache-2.0

package rknp

// Keeps the module's copy of the C header identical to the repository's
// abi/rknp.h, the one the library is built from. The only check of the
// copy: `go test ./...` runs it for Go developers and in the test command.

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestBundledHeaderMatchesABI(t *testing.T) {
	// Tests run in the package directory: go-bindings/rknp.
	abiHeader := filepath.Join("..", "..", "abi", "rknp.h")
	want, err := os.ReadFile(abiHeader)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not reachable: the module is not inside the rknp repository (e.g. a module-cache copy), nothing to compare", abiHeader)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("rknp.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("go-bindings/rknp/rknp.h differs from abi/rknp.h; the bindings must ship the header the library is built from: cp abi/rknp.h go-bindings/rknp/rknp.h")
	}
}
