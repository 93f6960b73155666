// SPDX-License-Identifier: Apache-2.0

package rknp_test

// An example of the plugin as rootlesskit's network driver;
// examples_run_test.go runs it against the built library.

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/rknp/rknp/go-bindings/network/rknp"
)

// The parent half of --net=plugin, driven the way rootlesskit's parent
// drives it: rootlesskit calls ConfigureNetwork once the child process
// exists (here this process stands in for it) and sends the message to the
// child, whose driver (rknp.NewChildDriver) creates the tap from it.
// Programs built on rootlesskit's packages set
// parent.Opt.NetworkDriver = d and child.Opt.NetworkDriver =
// rknp.NewChildDriver(path) instead of calling these methods. The
// library's configuration is embedded in ParentOpt (opt.MTU here).
func ExampleNewParentDriver() {
	path := os.Getenv("RKNP_PLUGIN") // e.g. /usr/local/lib/librknp.so.1
	if path == "" {
		path = "librknp.so.1"
	}
	opt := rknp.ParentOpt{PluginPath: path}
	opt.MTU = 1500
	d, err := rknp.NewParentDriver(opt)
	if err != nil {
		log.Fatal(err)
	}
	info, err := d.Info(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("driver:", info.Driver, "child IP:", info.ChildIP, "DNS:", info.DNS)

	stateDir, err := os.MkdirTemp("", "rknp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(stateDir)
	msg, cleanup, err := d.ConfigureNetwork(os.Getpid(), stateDir, "")
	if cleanup != nil {
		defer cleanup()
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("to the child: %s %s/%d via %s, mtu %d\n", msg.Dev, msg.IP, msg.Netmask, msg.Gateway, msg.MTU)
}
