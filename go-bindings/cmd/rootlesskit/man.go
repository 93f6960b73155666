// SPDX-License-Identifier: Apache-2.0

package main

// The man page and the --help description: both come from the flag
// definitions, so they cannot disagree with the command.

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// generateManName prints the man page instead of running; hidden, so it
// appears neither in --help nor in the page itself.
const generateManName = "generate-man"

func generateManFlag() cli.Flag {
	return &cli.BoolFlag{Name: generateManName, Hidden: true,
		Usage: "print the rootlesskit(1) man page (roff) and exit"}
}

// description is the DESCRIPTION of --help and of the man page.
const description = `rootlesskit runs a command as a fake root: in a new user namespace
mapped to the caller's subordinate IDs, with a mount namespace and, on
request, network, PID, cgroup, UTS and IPC namespaces. It accepts every
flag and driver of upstream RootlessKit.

This build adds the network driver --net=plugin: the rknp plugin library
(--net-plugin, flags --plugin-*) runs a libslirp network stack inside the
rootlesskit process itself, so no slirp4netns process is needed. With
--port-driver=plugin, published ports go through the same stack.

Example: a shell with its own network, port 8080 of the host published to
port 80 inside:

    rootlesskit --net=plugin --disable-host-loopback --copy-up=/etc --port-driver=plugin -p 127.0.0.1:8080:80/tcp bash

Rootless Docker with the plugin network:

    DOCKERD_ROOTLESS_ROOTLESSKIT_NET=plugin dockerd-rootless.sh

The caller needs entries in /etc/subuid and /etc/subgid.`

// writeManPage prints the man page in section 1 to the app's writer. It
// runs inside the app's Action, so app.VisibleFlags() includes --help and
// --version.
func writeManPage(app *cli.App) error {
	page := &cli.App{
		Name:        app.Name,
		Usage:       app.Usage,
		UsageText:   app.UsageText,
		Description: app.Description,
	}
	for _, f := range app.VisibleFlags() {
		if df, ok := f.(docFlag); ok {
			f = manFlag{df}
		}
		page.Flags = append(page.Flags, f)
	}
	text, err := page.ToManWithSection(1)
	if err != nil {
		return fmt.Errorf("generating the man page: %w", err)
	}
	_, err = fmt.Fprint(app.Writer, text)
	return err
}

// docFlag is what urfave/cli documents of a flag.
type docFlag interface {
	cli.DocGenerationFlag
	cli.VisibleFlag
}

// manFlag escapes a usage text for the Markdown urfave/cli renders the page
// from: "[auto, true, false] (default: ...)" would otherwise become a link
// and lose the default, "127.0.0.1:*" start emphasis.
type manFlag struct{ docFlag }

var markdownEscaper = strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, "*", `\*`, "_", `\_`, "`", "\\`")

func (f manFlag) GetUsage() string { return markdownEscaper.Replace(f.docFlag.GetUsage()) }
