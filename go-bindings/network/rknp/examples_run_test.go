// SPDX-License-Identifier: Apache-2.0

package rknp_test

// Runs the example against the built library and checks what it prints
// (skips, like the other tests, when no library is built).

import (
	"testing"

	"github.com/rknp/rknp/go-bindings/internal/examplerun"
	"github.com/rknp/rknp/go-bindings/internal/testplugin"
)

func TestExampleNewParentDriver(t *testing.T) {
	t.Setenv("RKNP_PLUGIN", testplugin.Path(t))
	want := "driver: plugin child IP: 10.0.2.100 DNS: [10.0.2.3]\n" +
		"to the child: tap0 10.0.2.100/24 via 10.0.2.2, mtu 1500\n"
	if got := examplerun.Output(t, ExampleNewParentDriver); got != want {
		t.Fatalf("ExampleNewParentDriver printed:\n%s\nwant:\n%s", got, want)
	}
}
