// SPDX-License-Identifier: Apache-2.0

package main

// The man page printed by --generate-man documents every visible flag, the
// plugin's with their usage, and keeps every default.

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func generateMan(t *testing.T) string {
	t.Helper()
	var debug bool
	var out bytes.Buffer
	app := newApp(roleParent, &debug)
	app.Writer = &out
	if err := app.Run([]string{"rootlesskit", "--" + generateManName}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestManPageDocumentsFlags(t *testing.T) {
	page := generateMan(t)
	if !strings.HasPrefix(page, ".nh\n.TH rootlesskit 1") {
		t.Fatalf("not a section 1 man page for rootlesskit:\n%.200s", page)
	}
	var debug bool
	for _, f := range appFlags(&debug) {
		df := f.(docFlag)
		for _, name := range f.Names() {
			dashes := "--"
			if len(name) == 1 {
				dashes = "-"
			}
			if !regexp.MustCompile(`(^|[^-\w])` + regexp.QuoteMeta(dashes+name) + `([^-\w]|$)`).MatchString(page) {
				t.Errorf("man page lacks %s%s", dashes, name)
			}
		}
		if name := f.Names()[0]; name == "net-plugin" || strings.HasPrefix(name, "plugin-") {
			if !strings.Contains(page, df.GetUsage()) {
				t.Errorf("man page lacks the usage of --%s: %q", name, df.GetUsage())
			}
		}
		if def := df.GetValue(); df.TakesValue() && def != "" && def != "0" {
			if !strings.Contains(page, "(default: \""+def+"\")") {
				t.Errorf("man page lacks the default of --%s (%q)", f.Names()[0], def)
			}
		}
	}
	for _, want := range []string{"--plugin-tcp", "--plugin-enable-dhcp", "--net-plugin", "--net=plugin", "--help", "--version"} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %s", want)
		}
	}
	if strings.Contains(page, generateManName) {
		t.Errorf("man page shows the hidden --%s", generateManName)
	}
	// A usage text that Markdown took for a link loses its default.
	if strings.Contains(page, `\[la]`) {
		t.Errorf("man page has a link made from a usage text:\n%s", page)
	}
}

// --generate-man is hidden from --help too.
func TestGenerateManHiddenFromHelp(t *testing.T) {
	var debug bool
	var out bytes.Buffer
	app := newApp(roleParent, &debug)
	app.Writer = &out
	if err := app.Run([]string{"rootlesskit", "--help"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "--plugin-tcp") || strings.Contains(out.String(), generateManName) {
		t.Fatalf("--help should list --plugin-tcp but not --%s:\n%s", generateManName, out.String())
	}
}

var _ docFlag = (*cli.StringFlag)(nil)
