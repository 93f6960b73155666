// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rootless-containers/rootlesskit/v3/cmd/rootlesskit/unshare"
	"github.com/rootless-containers/rootlesskit/v3/pkg/child"
	"github.com/rootless-containers/rootlesskit/v3/pkg/common"
	"github.com/rootless-containers/rootlesskit/v3/pkg/parent"
	"github.com/rootless-containers/rootlesskit/v3/pkg/systemd/activation"
	"github.com/rootless-containers/rootlesskit/v3/pkg/version"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/rknp/rknp/go-bindings/network/rknp"
)

// Environment keys shared by parent and child. The undocumented ones must
// match between the two halves only, but keeping upstream's names lets
// tools that inspect them keep working.
const (
	pipeFDEnvKey              = "_ROOTLESSKIT_PIPEFD_UNDOCUMENTED"
	childUseActivationEnvKey  = "_ROOTLESSKIT_SYSTEMD_ACTIVATION_CHILD_USE_UNDOCUMENTED"
	runActivationHelperEnvKey = "_ROOTLESSKIT_SYSTEMD_ACTIVATION_RUN_HELPER_UNDOCUMENTED"
	stateDirEnvKey            = "ROOTLESSKIT_STATE_DIR"
	parentEUIDEnvKey          = "ROOTLESSKIT_PARENT_EUID"
	parentEGIDEnvKey          = "ROOTLESSKIT_PARENT_EGID"
)

// role is which half of rootlesskit this process is.
type role string

const (
	roleParent     role = "parent"
	roleChild      role = "child "
	roleActivation role = "activation_helper"
)

func main() {
	// rootlesskit re-executes itself as "unshare" to create the detached
	// network namespace (--detach-netns).
	if filepath.Base(os.Args[0]) == "unshare" {
		unshare.Main()
		return
	}
	r := currentRole()
	if r == roleParent {
		holdMmapThreshold() // the parent loads the plugin
	}
	var debug bool
	app := newApp(r, &debug)
	cli.VersionPrinter = printVersion
	if err := app.Run(os.Args); err != nil {
		if debug {
			fmt.Fprintf(os.Stderr, "[rootlesskit:%s] error: %+v\n", r, err)
		} else {
			fmt.Fprintf(os.Stderr, "[rootlesskit:%s] error: %v\n", r, err)
		}
		// The child command's exit status becomes ours.
		code, ok := common.GetExecExitStatus(err)
		if !ok {
			code = 1
		}
		os.Exit(code)
	}
}

// newApp is the command line: upstream's flags, the plugin's, and the
// hidden --generate-man.
func newApp(r role, debug *bool) *cli.App {
	app := cli.NewApp()
	app.Name = "rootlesskit"
	app.Version = version.Version
	app.HideHelpCommand = true
	app.Usage = "Linux-native fakeroot using user namespaces (with the rknp network plugin)"
	app.UsageText = "rootlesskit [global options] [arguments...]"
	app.Description = description
	app.Flags = append(appFlags(debug), generateManFlag())
	app.Before = func(*cli.Context) error {
		if *debug {
			logrus.SetLevel(logrus.DebugLevel)
		}
		logrus.SetFormatter(&prefixFormatter{prefix: "[rootlesskit:" + string(r) + "] ", Formatter: logrus.StandardLogger().Formatter})
		return nil
	}
	app.Action = func(c *cli.Context) error {
		if c.Bool(generateManName) {
			return writeManPage(c.App)
		}
		return run(c, r)
	}
	return app
}

func currentRole() role {
	if v, ok := os.LookupEnv(runActivationHelperEnvKey); ok {
		if b, err := strconv.ParseBool(v); err == nil && b {
			return roleActivation
		}
	}
	if os.Getenv(pipeFDEnvKey) != "" {
		return roleChild
	}
	return roleParent
}

func run(c *cli.Context, r role) error {
	if s := c.String("print-semver"); s != "" {
		return printSemver(c, s)
	}
	if c.NArg() < 1 {
		return errors.New("no command specified")
	}
	switch r {
	case roleActivation:
		return activation.ActivationHelper(activation.Opt{
			RunActivationHelperEnvKey: runActivationHelperEnvKey,
			TargetCmd:                 c.Args().Slice(),
		})
	case roleChild:
		opt, err := childOpt(c)
		if err != nil {
			return err
		}
		return child.Child(opt)
	}
	opt, err := parentOpt(c)
	if err != nil {
		return err
	}
	return parent.Parent(opt)
}

// printVersion is upstream's first line, then the plugin --net=plugin
// would load (--net-plugin or its default): path, rknp and libslirp
// versions, ABI; or why it cannot be loaded.
func printVersion(c *cli.Context) {
	fmt.Fprintf(c.App.Writer, "%s version %s\n", c.App.Name, c.App.Version)
	path := c.String("net-plugin")
	description, err := rknp.Describe(path)
	if err != nil {
		fmt.Fprintf(c.App.Writer, "plugin: %s: not loadable: %v\n", path, err)
		return
	}
	fmt.Fprintf(c.App.Writer, "plugin: %s\n", description)
}
