// SPDX-License-Identifier: Apache-2.0

// A program outside the rknp repository, as a user of the Go module would
// write it: it loads the plugin library named by its argument and prints
// the ABI version the bindings were built for, the library's ABI version
// and the library's version string. tests/go-external/run.sh builds and
// checks it.
package main

import (
	"fmt"
	"os"

	"github.com/rknp/rknp/go-bindings/rknp"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rknp-external LIBRARY")
		os.Exit(2)
	}
	lib, err := rknp.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	major, minor := lib.ABIVersion()
	fmt.Printf("bindings ABI %d.%d\n", rknp.ABIMajor, rknp.ABIMinor)
	fmt.Printf("library ABI %d.%d\n", major, minor)
	fmt.Printf("library version %s\n", lib.Version())
}
