#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# What help2man reads to write rknp-slirp4netns.1: the command's own --help
# with option lines indented (help2man only turns indented lines into an
# option list; the command keeps slirp4netns's unindented layout, which
# rootlesskit and Podman probe) and the first --version line (the rest
# names the build machine's libraries, not what the page documents).
#   RKNP_SLIRP4NETNS=path/to/rknp-slirp4netns help2man-view.sh --help|--version
set -euo pipefail
case ${1:-} in
    --help) (exec -a rknp-slirp4netns "$RKNP_SLIRP4NETNS" --help) | sed 's/^-/  -/' ;;
    --version) (exec -a rknp-slirp4netns "$RKNP_SLIRP4NETNS" --version) | head -n1 ;;
    *) exit 2 ;;
esac
