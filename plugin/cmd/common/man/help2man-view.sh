#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# What help2man reads to write a command's man page: the command's own
# --help with option lines indented (help2man only turns indented lines
# into an option list; rknp-slirp4netns keeps slirp4netns's unindented
# layout, which rootlesskit and Podman probe) and the first --version line
# (the rest names the build machine's libraries, not what the page
# documents).
#   RKNP_COMMAND=path/to/rknp-NAME RKNP_COMMAND_NAME=rknp-NAME \
#       help2man-view.sh --help|--version
set -euo pipefail
case ${1:-} in
    --help) (exec -a "$RKNP_COMMAND_NAME" "$RKNP_COMMAND" --help) | sed 's/^-/  -/' ;;
    --version) (exec -a "$RKNP_COMMAND_NAME" "$RKNP_COMMAND" --version) | head -n1 ;;
    *) exit 2 ;;
esac
