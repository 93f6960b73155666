// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/rootless-containers/rootlesskit/v3/pkg/version"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
)

// prefixFormatter tags each line with the process role, as upstream does,
// so parent and child output can be told apart on a shared stderr.
type prefixFormatter struct {
	prefix string
	logrus.Formatter
}

func (f *prefixFormatter) Format(e *logrus.Entry) ([]byte, error) {
	e.Message = f.prefix + e.Message
	return f.Formatter.Format(e)
}

// debugWriter turns a driver's raw output into logrus debug lines.
type debugWriter struct{ label string }

func (w debugWriter) Write(p []byte) (int, error) {
	logrus.Debug(w.label + ": " + strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func printSemver(c *cli.Context, part string) error {
	v, err := semver.NewVersion(version.Version)
	if err != nil {
		return fmt.Errorf("failed to parse version %q: %w", version.Version, err)
	}
	var n uint64
	switch part {
	case "major":
		n = v.Major()
	case "minor":
		n = v.Minor()
	case "patch":
		n = v.Patch()
	default:
		return fmt.Errorf("expected --print-semver=(major|minor|patch), got %q", part)
	}
	fmt.Fprintln(c.App.Writer, n)
	return nil
}
