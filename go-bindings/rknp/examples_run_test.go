// SPDX-License-Identifier: Apache-2.0

package rknp_test

// Runs the examples against the built library and checks what they print,
// as an `// Output:` comment would, but skipping (like the other tests)
// when no library is built.

import (
	"fmt"
	"testing"

	"github.com/rknp/rknp/go-bindings/internal/examplerun"
	"github.com/rknp/rknp/go-bindings/internal/testplugin"
	"github.com/rknp/rknp/go-bindings/rknp"
)

func TestExamples(t *testing.T) {
	t.Setenv("RKNP_PLUGIN", testplugin.Path(t))
	for _, ex := range []struct {
		name string
		fn   func()
		want string
	}{
		{"ExampleOpen", ExampleOpen, fmt.Sprintf("ABI major: %d\nhas what these bindings need: true\n", rknp.ABIMajor)},
		{"ExampleLibrary_NewParent", ExampleLibrary_NewParent,
			"child: tap0 10.0.2.100/24 gateway 10.0.2.2 dns [10.0.2.3] mtu 1500\n" +
				"hand-over pairs for the child: true\n" +
				"tap attached: false\n"},
	} {
		if got := examplerun.Output(t, ex.fn); got != ex.want {
			// Stop: a later example would log.Fatal on the same cause.
			t.Fatalf("%s printed:\n%s\nwant:\n%s", ex.name, got, ex.want)
		}
	}
}
