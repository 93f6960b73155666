// SPDX-License-Identifier: Apache-2.0

package rknp_test

// Examples of loading a plugin and starting a parent. They print what a
// program would see; examples_run_test.go runs them against the built
// library and checks that output (an `// Output:` comment would make
// `go test` fail where no library is built).

import (
	"fmt"
	"log"
	"os"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// pluginPath is where the examples find the library: $RKNP_PLUGIN, else
// the name the dynamic loader resolves for an installed library.
func pluginPath() string {
	if p := os.Getenv("RKNP_PLUGIN"); p != "" {
		return p
	}
	return "librknp.so.1"
}

// Load the plugin and check which ABI it speaks.
func ExampleOpen() {
	lib, err := rknp.Open(pluginPath())
	if err != nil {
		fmt.Println("cannot load the plugin:", err)
		return
	}
	major, minor := lib.ABIVersion()
	fmt.Println("ABI major:", major)
	fmt.Println("has what these bindings need:", major == rknp.ABIMajor && minor >= rknp.ABIMinor)
}

// Start the network stack of a rootlesskit parent. The child process named
// by the PID (here this process stands in for it) hands its tap over
// through the socket in the state directory.
func ExampleLibrary_NewParent() {
	lib, err := rknp.Open(pluginPath())
	if err != nil {
		log.Fatal(err)
	}
	p, err := lib.NewParent(rknp.Config{
		MTU: 1500,
		Log: func(level rknp.Level, msg string) {
			if level <= rknp.LevelWarn {
				log.Printf("rknp %s: %s", level, msg)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	stateDir, err := os.MkdirTemp("", "rknp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(stateDir)
	if err := p.Start(stateDir, os.Getpid()); err != nil {
		log.Fatal(err)
	}

	n, err := p.Network()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("child: %s %s/%d gateway %s dns %v mtu %d\n", n.IfName, n.IP, n.PrefixLen, n.Gateway, n.DNS, n.MTU)
	// The child needs these pairs: lib.ChildConfigure(opaque, netnsPath).
	opaque := p.Opaque()
	fmt.Println("hand-over pairs for the child:", len(opaque) > 0)
	st, err := p.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tap attached:", st.TapAttached)
}
