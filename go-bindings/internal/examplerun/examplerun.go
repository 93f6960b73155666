// SPDX-License-Identifier: Apache-2.0

// Package examplerun runs a package's Example functions from a test and
// returns what they print, so their output can be checked only where the
// plugin library is built (an `// Output:` comment would run them always).
package examplerun

import (
	"io"
	"os"
	"testing"
)

// Output returns what fn prints to os.Stdout. Not for parallel tests:
// os.Stdout is process-wide.
func Output(t testing.TB, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	restored := false
	restore := func() {
		if !restored {
			restored = true
			os.Stdout = saved
			w.Close()
		}
	}
	defer func() { // also when fn panics or calls runtime.Goexit
		restore()
		r.Close()
	}()
	fn()
	restore()
	return string(<-done)
}
