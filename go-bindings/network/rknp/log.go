// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"github.com/sirupsen/logrus"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// Logrus returns a LogFunc that forwards the library's messages to logrus,
// rootlesskit's logger, prefixed with label.
func Logrus(label string) rknp.LogFunc {
	return func(level rknp.Level, msg string) {
		e := logrus.WithField("driver", DriverName)
		msg = label + ": " + msg
		switch level {
		case rknp.LevelError:
			e.Error(msg)
		case rknp.LevelWarn:
			e.Warn(msg)
		default:
			// Info lines (stack started, tap attached) are debug output
			// from rootlesskit's point of view, as for slirp4netns.
			e.Debug(msg)
		}
	}
}
