#!/usr/bin/env bash
# buildah on the project's own image storage (outside the repository, kept between runs), for
# image/build.sh and the tests that run the image: nothing of the machine's containers is touched.
# Run containers with `run --isolation chroot`: OCI runtimes (crun, runc) cannot start containers
# in every sandbox, and chroot needs none.
#
#   image/buildah.sh <buildah arguments...>
set -euo pipefail
cache="${KNATIVE_PRESTART_CACHE:-$HOME/.cache/knative-prestart}"
command -v buildah >/dev/null 2>&1 || { echo "image: buildah is not installed (Debian: apt-get install buildah)" >&2; exit 1; }
exec buildah --root "$cache/containers/storage" --runroot "$cache/containers/run" --storage-driver overlay "$@"
