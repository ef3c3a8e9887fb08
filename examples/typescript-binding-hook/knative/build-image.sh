#!/usr/bin/env bash
# The example hook as an image, for running it as a Knative Service (service.yaml beside this file).
# Built with buildah like `npm run image`, and on that image: the knative-prestart image already
# holds Node (/nodejs/bin/node), the production node_modules the SDK needs and a non-root user, so
# this image adds one file, the example bundled with esbuild (index.ts, secrets.ts and the SDK's
# sources; packages stay external and load from /app/node_modules), and makes it the entrypoint.
#
#   examples/typescript-binding-hook/knative/build-image.sh     (after npm run image)
#
# Output, beside the gate's image:
#   ${KNATIVE_PRESTART_CACHE:-~/.cache/knative-prestart}/images/typescript-binding-hook-<version>.oci.tar
#   .../images/typescript-binding-hook-<version>.json   digest, sizes and reference (image/describe.mjs)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cache="${KNATIVE_PRESTART_CACHE:-$HOME/.cache/knative-prestart}"
die() { echo "hook image: $*" >&2; exit 1; }
version="$(node -p 'require(process.argv[1]).version' "$root/package.json")"
base="$cache/images/knative-prestart-$version.oci.tar"
[ -s "$base" ] || die "no knative-prestart image at $base: run npm run image first"
name=typescript-binding-hook
ref="localhost/knative-prestart/$name:$version"
out="$cache/images/$name-$version.oci.tar"
t0=$SECONDS

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$root/node_modules/.bin/esbuild" "$root/examples/typescript-binding-hook/index.ts" --bundle --platform=node --format=esm \
  --packages=external --target=node20 --log-level=warning --outfile="$work/hook.mjs"
chmod 0644 "$work/hook.mjs"

bh() { "$root/image/buildah.sh" "$@"; }
c="$(bh from --quiet "oci-archive:$base")"
bh copy --quiet --chown 0:0 "$c" "$work/hook.mjs" /app/examples/typescript-binding-hook/hook.mjs >/dev/null
bh config --entrypoint '["/nodejs/bin/node", "/app/examples/typescript-binding-hook/hook.mjs"]' --cmd '' \
  --label org.opencontainers.image.title=knative-prestart-typescript-binding-hook "$c"
rm -f "$out.tmp"
# --timestamp 0: the same sources and base give the same digest.
bh commit --quiet --timestamp 0 --format oci --disable-compression=false --rm "$c" "oci-archive:$out.tmp:$ref" >/dev/null
mv "$out.tmp" "$out"
node "$root/image/describe.mjs" "$out" "$ref" "$cache/images/$name-$version.json" >&2
echo "hook image: built in $((SECONDS - t0))s" >&2
