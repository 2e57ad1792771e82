#!/bin/sh
# Refuses a base image named by tag alone: a tag can be moved upstream, a digest cannot. The
# Dockerfile's build stage runs this first; ALLOW_UNPINNED_BASE=1 lets a development build
# through, with a warning. Usage: pinned_base.sh IMAGE [ALLOW_UNPINNED_BASE]
image="$1"
allow="${2:-0}"
if printf '%s\n' "$image" | grep -Eq '^[^@[:space:]]+@sha256:[0-9a-f]{64}$'; then
  exit 0
fi
if [ "$allow" = 1 ]; then
  echo "warning: base image '$image' is not pinned by digest (ALLOW_UNPINNED_BASE=1)" >&2
  exit 0
fi
echo "error: base image '$image' is not pinned by digest: build with" \
     "--build-arg PYTHON_IMAGE=<image>@sha256:<digest> (see the Dockerfile's header), or" \
     "--build-arg ALLOW_UNPINNED_BASE=1 for a development build" >&2
exit 1
