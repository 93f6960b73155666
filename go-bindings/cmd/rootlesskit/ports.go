// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/rootless-containers/rootlesskit/v3/pkg/network"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port/builtin"
	gvisortapvsockport "github.com/rootless-containers/rootlesskit/v3/pkg/port/gvisortapvsock"
	pastaport "github.com/rootless-containers/rootlesskit/v3/pkg/port/pasta"
	slirp4netnsport "github.com/rootless-containers/rootlesskit/v3/pkg/port/slirp4netns"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/rknp/rknp/go-bindings/port/rknp"
)

// checkPortDriverNet refuses port drivers that need a particular network
// driver, before any driver is built (so the message names the real
// problem rather than, say, a missing slirp4netns binary).
func checkPortDriverNet(portDriver, netDriver string) error {
	if portDriver == rknp.DriverName && netDriver != "plugin" {
		return fmt.Errorf("port driver %q requires --net=plugin (got --net=%s); use --port-driver=builtin with other networks",
			portDriver, netDriver)
	}
	return nil
}

// newParentPortDriver builds the parent half of --port-driver (nil for
// none/implicit) for netDriver (nil for --net=host). builtin works with
// every network driver, plugin included; plugin forwards through the
// plugin network driver's stack.
func newParentPortDriver(c *cli.Context, nf netFlags, stateDir string, netDriver network.ParentDriver) (port.ParentDriver, error) {
	haveNet := netDriver != nil
	switch s := c.String("port-driver"); s {
	case rknp.DriverName:
		if err := checkPortDriverNet(s, nf.driver); err != nil {
			return nil, err
		}
		d, err := rknp.NewParentDriver(debugWriter{"port/plugin"}, netDriver)
		if err != nil {
			return nil, fmt.Errorf("port driver %q: %w", s, err)
		}
		return d, nil
	case "none":
		if len(c.StringSlice("publish")) != 0 {
			return nil, fmt.Errorf("port driver %q does not support publishing ports", s)
		}
		return nil, nil
	case "implicit":
		if nf.driver != "pasta" {
			return nil, errors.New("port driver \"implicit\" requires --net=pasta")
		}
		return nil, nil
	case "pasta":
		return nil, errors.New(`unknown port driver "pasta": did you mean "pesto"?`)
	case "slirp4netns":
		if nf.driver != "slirp4netns" {
			return nil, errors.New("port driver requires slirp4netns network")
		}
		return slirp4netnsport.NewParentDriver(debugWriter{"port/slirp4netns"}, filepath.Join(stateDir, ".s4nn.sock"))
	case "builtin":
		if !haveNet {
			return nil, errors.New("port driver requires non-host network")
		}
		backend := c.String("source-ip-transparent-backend")
		switch backend {
		case "auto", "nft", "iptables":
		default:
			return nil, fmt.Errorf("unknown source-ip-transparent-backend: %s", backend)
		}
		return builtin.NewParentDriver(debugWriter{"port/builtin"}, stateDir, c.Bool("source-ip-transparent"), backend)
	case "gvisor-tap-vsock":
		logrus.Warn("\"gvisor-tap-vsock\" port driver is experimental")
		if !haveNet {
			return nil, errors.New("port driver requires non-host network")
		}
		return gvisortapvsockport.NewParentDriver(debugWriter{"port/gvisor-tap-vsock"}, stateDir)
	case "pesto":
		if nf.driver != "pasta" {
			return nil, errors.New("port driver \"pesto\" requires --net=pasta")
		}
		bin := c.String("pesto-binary")
		if _, err := exec.LookPath(bin); err != nil {
			return nil, err
		}
		return pastaport.NewParentDriver(debugWriter{"port/pesto"}, bin, filepath.Join(stateDir, ".pasta.sock"), nf.ipv6)
	default:
		return nil, fmt.Errorf("unknown port driver: %s", s)
	}
}

// newChildPortDriver is the child half of --port-driver.
func newChildPortDriver(s string) (port.ChildDriver, error) {
	switch s {
	case "none", "implicit":
		return nil, nil
	case "slirp4netns":
		return slirp4netnsport.NewChildDriver(), nil
	case "builtin":
		return builtin.NewChildDriver(debugWriter{"port/builtin"}), nil
	case rknp.DriverName:
		return rknp.NewChildDriver(), nil
	case "gvisor-tap-vsock":
		return gvisortapvsockport.NewChildDriver(), nil
	case "pesto":
		return pastaport.NewChildDriver(), nil
	}
	return nil, fmt.Errorf("unknown port driver: %s", s)
}
