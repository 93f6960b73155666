// SPDX-License-Identifier: Apache-2.0

package main

// --plugin-tcp and --plugin-tcp-peek reach the plugin's configuration; a
// wrong value fails before anything starts, naming the flag.

import (
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/rknp/rknp/go-bindings/internal/testplugin"
	"github.com/rknp/rknp/go-bindings/rknp"
)

func TestPluginTCPFlags(t *testing.T) {
	plugin := testplugin.Path(t)
	quietLogrus(t)
	for _, tc := range []struct {
		args []string
		want string // error text; "" for success
	}{
		{nil, ""},
		{[]string{"--plugin-tcp-peek=auto"}, ""},
		{[]string{"--plugin-tcp-peek=offset"}, ""},
		{[]string{"--plugin-tcp-peek=discard", "--plugin-tcp=fast"}, ""},
		{[]string{"--plugin-tcp-peek="}, ""},
		{[]string{"--plugin-tcp-peek=nopeek"}, `--plugin-tcp-peek: invalid TCP peek mode "nopeek": must be "auto", "offset" or "discard"`},
		{[]string{"--plugin-tcp=turbo"}, `--plugin-tcp: invalid TCP path "turbo"`},
	} {
		args := append([]string{"--net=plugin", "--net-plugin=" + plugin}, tc.args...)
		runWith(t, args, func(c *cli.Context) {
			nf, err := parseNetFlags(c)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			d, err := newParentNetDriver(c, nf, t.TempDir())
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || rknp.CodeOf(err) != rknp.CodeInvalidArgument {
					t.Errorf("%v: want an invalid argument containing %q, got %v", tc.args, tc.want, err)
				}
				return
			}
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
				return
			}
			// Started and stopped again (offset fails to start on a
			// kernel without SO_PEEK_OFF).
			_, cleanup, err := d.ConfigureNetwork(os.Getpid(), t.TempDir(), "")
			if err != nil && !(rknp.CodeOf(err) == rknp.CodeUnsupported && strings.Contains(strings.Join(tc.args, " "), "offset")) {
				t.Errorf("%v: start: %v", tc.args, err)
			}
			if cleanup != nil {
				_ = cleanup()
			}
		})
	}
}
