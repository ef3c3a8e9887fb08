#!/usr/bin/env bash
# Builds the real control-plane binaries from Go modules at pinned versions and caches them
# outside the repo, so a warm machine skips the build. Prints one clear line on failure.
#
#   devcluster/build-binaries.sh [all|quickstart|quickstart-broker|kubernetes|etcd|kwok|knative-serving|knative-eventing|nats|kn|jaeger|node|node-images|knative-serving-images|knative-eventing-images]
#
# Cache: ${KNATIVE_PRESTART_CACHE:-~/.cache/knative-prestart}/bin/<component>-<version>/
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# KNATIVE_PRESTART_VERSIONS names another versions file (the compatibility matrix's cells).
# shellcheck source=versions.env
source "${KNATIVE_PRESTART_VERSIONS:-$here/versions.env}"

cache="${KNATIVE_PRESTART_CACHE:-$HOME/.cache/knative-prestart}"
work="$cache/build"
mkdir -p "$work"
# One build at a time per cache: two runs (a test run and the matrix, say) would otherwise edit the
# same wrapper modules and outputs at once. The second waits, then finds the first's work done.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.build.lock"
  flock -n 9 || { echo "build-binaries: waiting for another build in $cache ..." >&2; flock 9; }
fi

die() { echo "build-binaries: $*" >&2; exit 1; }
command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: install Go >= 1.24 (https://go.dev/doc/install) and retry"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export CGO_ENABLED=0

# Runs a build step; on failure shows the log tail and names the step, instead of a wall of output.
step() {
  local name="$1"; shift
  local log="$work/$name.log"
  echo "build-binaries: building $name ..." >&2
  local t0=$SECONDS
  # In the background and waited for: a subshell tested by `if` runs with errexit ignored, so a
  # failing command inside it would not stop the step and it would report "built".
  ( "$@" ) >"$log" 2>&1 &
  if ! wait "$!"; then
    tail -n 20 "$log" >&2
    die "building $name failed (full log: $log)"
  fi
  echo "build-binaries: $name built in $((SECONDS - t0))s" >&2
}

build_kubernetes() {
  local out="$cache/bin/kubernetes-$KUBERNETES_VERSION"
  [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kube-scheduler" ] && [ -x "$out/kubectl" ] && return 0
  local dir="$work/kubernetes-$KUBERNETES_VERSION"
  mkdir -p "$dir" "$out"
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local staging="v0.${KUBERNETES_VERSION#v1.}"
  (
    cd "$dir"
    [ -f go.mod ] || go mod init knative-prestart.local/kubernetes >/dev/null 2>&1
    go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" >/dev/null
    local modfile; modfile="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBERNETES_VERSION.mod"
    # k8s.io/kubernetes points its staging modules at ./staging; a consumer must point them at
    # the published v0.X.Y modules instead, or nothing resolves.
    go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => ./staging' "$modfile" | awk '{print $1}' | while read -r m; do
      go mod edit -replace="$m=$m@$staging"
    done
    cat > tools.go <<GO
//go:build tools
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go mod tidy -e >/dev/null 2>&1 || true
    local pkg=k8s.io/component-base/version
    local ld="-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
    for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      go build -tags tools -trimpath -ldflags "$ld" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c"
      mv "$out/$c.tmp" "$out/$c"
    done
  )
}

# Points modules at other versions in the wrapper module of the current directory: "<module>=<module>@<version> ..."
pin_replaces() {
  local r
  for r in $1; do go mod edit -replace="$r"; done
}

# A wrapper module that requires one module and builds one package of it, with optional replaces
# (pin_replaces' form) as the seventh argument.
build_go_main() {
  local name="$1" module="$2" version="$3" pkg="$4" bin="$5" ldflags="${6:-}"
  local out="$cache/bin/$name-$version"
  [ -x "$out/$bin" ] && return 0
  local dir="$work/$name-$version"
  mkdir -p "$dir" "$out"
  (
    cd "$dir"
    [ -f go.mod ] || go mod init "knative-prestart.local/$name" >/dev/null 2>&1
    pin_replaces "${7:-}"
    go get "$module@$version" >/dev/null
    printf '//go:build tools\npackage tools\n\nimport _ "%s"\n' "$pkg" > tools.go
    go mod tidy -e >/dev/null 2>&1 || true
    go build -tags tools -trimpath -ldflags "-s -w $ldflags" -o "$out/$bin.tmp" "$pkg"
    mv "$out/$bin.tmp" "$out/$bin"
  )
}

build_etcd() { build_go_main etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3 etcd; }
build_kwok() {
  build_go_main kwok sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok kwok
  # kwok moves nodes and pods through their lifecycle only by the Stage objects it is given:
  # ship the module's own stages (nodes become Ready and keep a lease, pods become Ready,
  # Job pods Succeed, deleted pods go away) next to the binary, from the same version.
  local out="$cache/bin/kwok-$KWOK_VERSION"
  [ -s "$out/stages.yaml" ] && return 0
  local src; src="$(cd "$work/kwok-$KWOK_VERSION" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  local f
  for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    echo "---"
    cat "$src/kustomize/stage/$f.yaml"
  done > "$out/stages.yaml.tmp"
  mv "$out/stages.yaml.tmp" "$out/stages.yaml"
}
build_nats() { build_go_main nats-server github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION" github.com/nats-io/nats-server/v2 nats-server; }
# Builds <name> from a main.go of ours inside the module directory <dir> (whose go.mod pins the
# upstream module), into <out>/<name>; rebuilt whenever that main.go changes.
build_own_main() {
  local dir="$1" out="$2" name="$3" main="$4"
  if { [ -x "$out/$name" ] && cmp -s "$main" "$out/$name.main.go"; }; then return 0; fi
  (
    cd "$dir"
    mkdir -p "cmd/$name"
    cp "$main" "cmd/$name/main.go"
    go mod tidy -e >/dev/null 2>&1 || true
    go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp" "./cmd/$name"
    mv "$out/$name.tmp" "$out/$name"
    cp "$main" "$out/$name.main.go"
  )
}
build_knative_serving() {
  local version="$KNATIVE_SERVING_VERSION"
  local out="$cache/bin/knative-serving-$version"
  local dir="$work/knative-serving-$version"
  build_go_main knative-serving knative.dev/serving "$version" knative.dev/serving/cmd/webhook webhook "" "${KNATIVE_SERVING_REPLACES:-}"
  # Knative's reconcilers under a main of ours (why: devcluster/knative-serving/main.go).
  build_own_main "$dir" "$out" serving-controllers "$here/knative-serving/main.go"
  # Knative's deployment hash of a Revision, for the e2e test of a tenant-made Deployment.
  build_own_main "$dir" "$out" deployment-hash "$here/knative-serving/deployment-hash/main.go"
  # Manifests from the very module versions the binaries were built from: Serving's config/core,
  # and the CRDs and config-network its module zip lacks (symlinks in the Serving repository,
  # which module zips drop) from knative.dev/networking and knative.dev/caching.
  [ -s "$out/config/caching/image.yaml" ] && [ -s "$out/config/release" ] && return 0
  local serving networking caching
  serving="$(cd "$dir" && go list -m -f '{{.Dir}}' knative.dev/serving)"
  networking="$(cd "$dir" && go list -m -f '{{.Dir}}' knative.dev/networking)"
  caching="$(cd "$dir" && go list -m -f '{{.Dir}}' knative.dev/caching)"
  rm -rf "$out/config.tmp"
  mkdir -p "$out/config.tmp/networking" "$out/config.tmp/caching"
  cp -r "$serving/config/core" "$out/config.tmp/"
  cp "$networking"/config/*.yaml "$out/config.tmp/networking/"
  cp "$caching/config/image.yaml" "$out/config.tmp/caching/"
  chmod -R u+w "$out/config.tmp"
  # What Knative's release does to the manifests: its objects name the release they belong to
  # (the gate reads it from the Revision CRD to check the supported range).
  local release; release="$(knative_release "$version")"
  grep -rl 'app.kubernetes.io/version: devel' "$out/config.tmp" | xargs -r sed -i "s|app.kubernetes.io/version: devel|app.kubernetes.io/version: \"$release\"|"
  echo "$release" > "$out/config.tmp/release"
  rm -rf "$out/config"
  mv "$out/config.tmp" "$out/config"
}

# Knative's release number of a Knative module version: v0.(N+27).P is Knative 1.N.P.
knative_release() {
  local minor="${1#v0.}" patch
  patch="${minor#*.}"; minor="${minor%%.*}"
  echo "1.$((minor - 27)).$patch"
}

# Knative Eventing's MT channel-based Broker with the InMemoryChannel, plus the manifests of the
# same module version.
build_knative_eventing() {
  local version="$KNATIVE_EVENTING_VERSION"
  local out="$cache/bin/knative-eventing-$version"
  local dir="$work/knative-eventing-$version"
  # The data plane's upstream mains as they are; the reconcilers under a main of ours (why:
  # devcluster/knative-eventing/main.go).
  local cmds="broker/ingress broker/filter in_memory/channel_dispatcher"
  local c bin missing=""
  for c in $cmds; do bin="${c//\//-}"; [ -x "$out/$bin" ] || missing="$missing $c"; done
  mkdir -p "$dir" "$out"
  (
    cd "$dir"
    [ -f go.mod ] || go mod init "knative-prestart.local/knative-eventing" >/dev/null 2>&1
    if [ -n "$missing" ] || [ ! -f tools.go ]; then
      go get "knative.dev/eventing@$version" >/dev/null
      {
        printf '//go:build tools\npackage tools\n\nimport (\n'
        for c in $cmds; do printf '\t_ "knative.dev/eventing/cmd/%s"\n' "$c"; done
        printf ')\n'
      } > tools.go
      go mod tidy -e >/dev/null 2>&1 || true
    fi
    for c in $missing; do
      bin="${c//\//-}"
      go build -tags tools -trimpath -ldflags "-s -w" -o "$out/$bin.tmp" "knative.dev/eventing/cmd/$c"
      mv "$out/$bin.tmp" "$out/$bin"
    done
  )
  build_own_main "$dir" "$out" eventing-controllers "$here/knative-eventing/main.go"
  # The ApiServerSource reconciler and its receive adapter, for the notifications test (why mains
  # of ours: the comments in those files).
  build_own_main "$dir" "$out" apiserversource-controller "$here/knative-eventing/apiserversource-controller/main.go"
  build_own_main "$dir" "$out" apiserversource-adapter "$here/knative-eventing/apiserversource-adapter/main.go"
  [ -s "$out/config/channels/in-memory-channel/resources/in-memory-channel.yaml" ] && return 0
  local eventing
  eventing="$(cd "$dir" && go list -m -f '{{.Dir}}' knative.dev/eventing)"
  rm -rf "$out/config.tmp"
  mkdir -p "$out/config.tmp/brokers" "$out/config.tmp/channels"
  cp -r "$eventing/config/core" "$out/config.tmp/"
  cp -r "$eventing/config/brokers/mt-channel-broker" "$out/config.tmp/brokers/"
  cp -r "$eventing/config/channels/in-memory-channel" "$out/config.tmp/channels/"
  chmod -R u+w "$out/config.tmp"
  rm -rf "$out/config"
  mv "$out/config.tmp" "$out/config"
}

# kn, Knative's CLI, for the kn plugin test. The Go module proxy refuses knative.dev/client, so
# kn is built from the knative/client repository's source at the pinned tag: from $KN_SOURCE (a
# git clone of knative/client, or a .tar.gz of its tree at the tag), kept in the cache as an
# archive of go.mod, go.sum, cmd/ and pkg/ (~400 KB) so later builds need neither. By default the
# source is third_party/knative-client/ (that archive, made with `git archive` of the tag's commit
# from the knative/client repository, with its LICENSE), so a new machine builds kn offline but
# for the Go module proxy.
KN_SOURCE="${KN_SOURCE:-$here/../third_party/knative-client/knative-client-$KN_VERSION.tar.gz}"
kn_archive="$cache/src/knative-client-$KN_VERSION.tar.gz"
kn_source_missing() {
  [ ! -x "$cache/bin/kn-$KN_VERSION/kn" ] && [ ! -s "$kn_archive" ] && [ -z "${KN_SOURCE:-}" ]
}
kn_source_hint="set KN_SOURCE to a git clone of https://github.com/knative/client (or a .tar.gz of its tree at $KN_VERSION), or put that archive at $kn_archive"
build_kn() {
  local version="$KN_VERSION"
  local out="$cache/bin/kn-$version"
  [ -x "$out/kn" ] && return 0
  local archive="$kn_archive"
  if [ ! -s "$archive" ]; then
    local src="${KN_SOURCE:-}"
    [ -n "$src" ] || die "kn: no source for knative/client $version: $kn_source_hint"
    mkdir -p "$cache/src"
    if [ -d "$src" ]; then
      local commit; commit="$(git -C "$src" rev-parse "$version^{commit}")" || die "kn: $src has no tag $version"
      [ "$commit" = "$KN_COMMIT" ] || die "kn: tag $version in $src is commit $commit, expected $KN_COMMIT"
      git -C "$src" archive --format=tar.gz -o "$archive.tmp" "$KN_COMMIT" go.mod go.sum cmd pkg
    else
      cp "$src" "$archive.tmp"
    fi
    mv "$archive.tmp" "$archive"
  fi
  local dir="$work/kn-$version"
  rm -rf "$dir"
  mkdir -p "$dir" "$out"
  tar -xzf "$archive" -C "$dir"
  [ -f "$dir/cmd/kn/main.go" ] || die "kn: $archive holds no cmd/kn/main.go"
  local pkg=knative.dev/client/pkg/commands/version
  (
    cd "$dir"
    go build -trimpath -ldflags "-s -w -X $pkg.Version=$version -X $pkg.GitRevision=${KN_COMMIT:0:8}" -o "$out/kn.tmp" ./cmd/kn
    mv "$out/kn.tmp" "$out/kn"
  )
}

# Jaeger (v2: cmd/jaeger, built on the OpenTelemetry Collector), the OTLP receiver and trace store
# the tracing test queries; a module of ours pins it as a tool (go get -tool).
build_jaeger() {
  local version="$JAEGER_VERSION"
  local out="$cache/bin/jaeger-$version"
  [ -x "$out/jaeger" ] && return 0
  local dir="$work/jaeger-$version"
  mkdir -p "$dir" "$out"
  (
    cd "$dir"
    [ -f go.mod ] || go mod init "knative-prestart.local/jaeger" >/dev/null 2>&1
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$out/jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
    mv "$out/jaeger.tmp" "$out/jaeger"
  )
}

# The real node (devcluster/node.ts): kubelet and kube-proxy from the same k8s.io/kubernetes
# module and work dir as the control plane (so the Go build cache is shared: build after
# `kubernetes`), CoreDNS from its module under a main of ours, and the pause and test-app images.
build_node_kubernetes() {
  local out="$cache/bin/kubernetes-$KUBERNETES_VERSION"
  [ -x "$out/kubelet" ] && [ -x "$out/kube-proxy" ] && return 0
  local dir="$work/kubernetes-$KUBERNETES_VERSION"
  [ -f "$dir/tools.go" ] || build_kubernetes
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  (
    cd "$dir"
    # The kubelet needs modules the control plane does not (github.com/armon/circbuf, ...).
    cat > tools_node.go <<GO
//go:build tools
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
    go mod tidy -e >/dev/null 2>&1 || true
    local pkg=k8s.io/component-base/version
    local ld="-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
    for c in kubelet kube-proxy; do
      go build -tags tools -trimpath -ldflags "$ld" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c"
      mv "$out/$c.tmp" "$out/$c"
    done
  )
}
build_coredns() {
  local version="$COREDNS_VERSION"
  local out="$cache/bin/coredns-$version"
  local dir="$work/coredns-$version"
  mkdir -p "$dir" "$out"
  (
    cd "$dir"
    [ -f go.mod ] || { go mod init knative-prestart.local/coredns >/dev/null 2>&1 && go get "github.com/coredns/coredns@$version" >/dev/null; }
  )
  build_own_main "$dir" "$out" coredns "$here/coredns/main.go"
}
# Images from scratch plus one static binary each (ko-style), built with buildah into OCI
# archives that devcluster/containerd.ts imports: nothing is pulled. Named by a hash of their
# source, so a changed main.go is a new image.
build_node_images() {
  local out="$cache/bin/node-images"
  local dir="$work/node-images"
  command -v buildah >/dev/null 2>&1 || die "node images: buildah is not installed (scripts/system-deps.sh installs it)"
  mkdir -p "$out" "$dir"
  [ -f "$dir/go.mod" ] || (cd "$dir" && go mod init knative-prestart.local/node-images >/dev/null 2>&1)
  local name tag ref c
  for name in pause test-app; do
    tag="$(sha256sum "$here/node-images/$name/main.go" | cut -c1-12)"
    ref="dev.local/knative-prestart/$name:$tag"
    if [ -s "$out/$name.oci.tar" ] && [ "$(cat "$out/$name.ref" 2>/dev/null)" = "$ref" ]; then continue; fi
    mkdir -p "$dir/$name"
    cp "$here/node-images/$name/main.go" "$dir/$name/main.go"
    (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$dir/$name.bin" "./$name")
    # A storage of our own (vfs: no overlay mounts needed), thrown away after each image.
    local store="$dir/storage"
    local -a bah=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
    c="$("${bah[@]}" from --isolation chroot scratch)"
    "${bah[@]}" copy "$c" "$dir/$name.bin" "/$name" >/dev/null
    "${bah[@]}" config --entrypoint "[\"/$name\"]" --cmd '' --user 65534:65534 "$c"
    rm -f "$out/$name.oci.tar.tmp"
    "${bah[@]}" commit --format oci "$c" "oci-archive:$out/$name.oci.tar.tmp:$ref" >/dev/null
    "${bah[@]}" rm "$c" >/dev/null
    "${bah[@]}" rmi --all >/dev/null 2>&1 || true
    rm -rf "$store"
    mv "$out/$name.oci.tar.tmp" "$out/$name.oci.tar"
    echo "$ref" > "$out/$name.ref"
  done
}
# Knative Serving's own mains as images for pods on the real node (devcluster/knative-serving-pods.ts),
# the way `ko build` makes them: from scratch, the static binary at /ko-app/<name> as entrypoint,
# a non-root user (Knative's manifests ask for runAsNonRoot), named dev.local/knative/serving/<name>
# (Knative skips tag resolution for dev.local). Built in the work dir of build_knative_serving, so
# its module graph and Go build cache are shared; needs build_knative_serving (and its config/).
KNATIVE_SERVING_IMAGES="controller webhook activator autoscaler queue"
build_knative_serving_images() {
  local version="$KNATIVE_SERVING_VERSION"
  local dir="$work/knative-serving-$version"
  command -v buildah >/dev/null 2>&1 || die "knative-serving images: buildah is not installed (scripts/system-deps.sh installs it)"
  [ -f "$dir/tools.go" ] || build_knative_serving
  # shellcheck disable=SC2086 # a list of names
  build_ko_images knative.dev/serving serving "$version" "$dir" "$cache/bin/knative-serving-$version/images" $KNATIVE_SERVING_IMAGES
}
# ko-style images of a Knative repository's mains (ko resolve's result, built here): each
# <module>/cmd/<cmd> built in <dir> (the work dir of its build, whose module graph and Go build
# cache are shared), from scratch plus the binary at /ko-app/<last element of cmd>, as uid 65532,
# named dev.local/knative/<repo>/<cmd>:<version>; the archive <out>/<cmd, / as ->.oci.tar. Only
# the missing ones are built.
build_ko_images() {
  local module="$1" repo="$2" version="$3" dir="$4" out="$5"
  shift 5
  mkdir -p "$out"
  local cmd file name missing=""
  for cmd in "$@"; do
    file="${cmd//\//-}"
    [ -s "$out/$file.oci.tar" ] && [ "$(cat "$out/$file.ref" 2>/dev/null)" = "dev.local/knative/$repo/$cmd:$version" ] || missing="$missing $cmd"
  done
  [ -n "$missing" ] || return 0
  (
    cd "$dir"
    {
      printf '//go:build tools\npackage tools\n\nimport (\n'
      for cmd in "$@"; do printf '\t_ "%s/cmd/%s"\n' "$module" "$cmd"; done
      printf ')\n'
    } > tools_images.go
    go mod tidy -e >/dev/null 2>&1 || true
    mkdir -p "$dir/images"
    for cmd in $missing; do
      go build -tags tools -trimpath -ldflags "-s -w" -o "$dir/images/${cmd//\//-}" "$module/cmd/$cmd"
    done
  )
  local store="$dir/images/storage" ref c
  local -a bah=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
  for cmd in $missing; do
    file="${cmd//\//-}"
    name="${cmd##*/}"
    ref="dev.local/knative/$repo/$cmd:$version"
    c="$("${bah[@]}" from --isolation chroot scratch)"
    "${bah[@]}" copy "$c" "$dir/images/$file" "/ko-app/$name" >/dev/null
    "${bah[@]}" config --entrypoint "[\"/ko-app/$name\"]" --cmd '' --user 65532:65532 --env KO_DATA_PATH=/var/run/ko "$c"
    rm -f "$out/$file.oci.tar.tmp"
    "${bah[@]}" commit --format oci "$c" "oci-archive:$out/$file.oci.tar.tmp:$ref" >/dev/null
    "${bah[@]}" rm "$c" >/dev/null
    "${bah[@]}" rmi --all >/dev/null 2>&1 || true
    mv "$out/$file.oci.tar.tmp" "$out/$file.oci.tar"
    echo "$ref" > "$out/$file.ref"
  done
  rm -rf "$store"
}
# Knative Eventing's own mains as images for pods on the real node (devcluster/knative-eventing-pods.ts),
# ko-style as for Serving above: what eventing-core.yaml, in-memory-channel.yaml and
# mt-channel-broker.yaml run for an MT channel-based Broker over the InMemoryChannel (the eventing
# controller and webhook, the IMC controller and dispatcher, the MT broker controller, ingress and
# filter), named dev.local/knative/eventing/<cmd path>:<version>, the archive <cmd path with / as ->.
# The core Deployments a Broker does not need (job-sink, request-reply, pingsource-mt-adapter) are
# not built, and knative-eventing-pods.ts does not apply them. Built in the work dir of
# build_knative_eventing (its module graph and Go build cache are shared; needs its config/).
KNATIVE_EVENTING_IMAGES="controller webhook mtchannel_broker broker/ingress broker/filter in_memory/channel_controller in_memory/channel_dispatcher"
build_knative_eventing_images() {
  local version="$KNATIVE_EVENTING_VERSION"
  local out="$cache/bin/knative-eventing-$version/images"
  local dir="$work/knative-eventing-$version"
  command -v buildah >/dev/null 2>&1 || die "knative-eventing images: buildah is not installed (scripts/system-deps.sh installs it)"
  [ -f "$dir/tools.go" ] && [ -s "$cache/bin/knative-eventing-$version/config/channels/in-memory-channel/resources/in-memory-channel.yaml" ] || build_knative_eventing
  mkdir -p "$out"
  # The two ConfigMaps of image names eventing-core.yaml carries for the eventing controller's env
  # (IntegrationSource/Sink and EventTransform images; nothing here runs those): symlinks from
  # config/core/configmaps into third_party/ in the repository, which module zips drop.
  local integrations="$cache/bin/knative-eventing-$version/config/third_party/eventing-integrations-latest"
  if [ ! -s "$integrations/eventing-transformations-images.yaml" ]; then
    local eventing
    eventing="$(cd "$dir" && go list -m -f '{{.Dir}}' knative.dev/eventing)"
    mkdir -p "$integrations"
    cp "$eventing"/third_party/eventing-integrations-latest/eventing-{integrations,transformations}-images.yaml "$integrations/"
    chmod u+w "$integrations"/*.yaml
  fi
  # shellcheck disable=SC2086 # a list of names
  build_ko_images knative.dev/eventing eventing "$version" "$dir" "$out" $KNATIVE_EVENTING_IMAGES
}
build_node() {
  build_node_kubernetes
  build_coredns
  build_node_images
}

what="${1:-all}"
case "$what" in
  kubernetes) step kubernetes build_kubernetes ;;
  etcd) step etcd build_etcd ;;
  kwok) step kwok build_kwok ;;
  nats) step nats-server build_nats ;;
  knative-serving) step knative-serving build_knative_serving ;;
  knative-eventing) step knative-eventing build_knative_eventing ;;
  kn) step kn build_kn ;;
  jaeger) step jaeger build_jaeger ;;
  node) step node build_node ;;
  node-images) step node-images build_node_images ;;
  knative-serving-images) step knative-serving-images build_knative_serving_images ;;
  knative-eventing-images) step knative-eventing-images build_knative_eventing_images ;;
  quickstart|quickstart-broker)
    # What `npm run quickstart` runs, and nothing else (a cold quickstart does not wait for
    # Jaeger, the real node, Knative's images or kn): the control plane and Knative Serving;
    # Eventing too for --broker.
    step etcd build_etcd
    step kwok build_kwok
    step kubernetes build_kubernetes
    step knative-serving build_knative_serving
    if [ "$what" = quickstart-broker ]; then step knative-eventing build_knative_eventing; fi
    ;;
  all)
    # Everything a test run uses: the control plane, then what transport and Knative tests run.
    step etcd build_etcd
    step kwok build_kwok
    step kubernetes build_kubernetes
    step nats-server build_nats
    step knative-serving build_knative_serving
    step knative-eventing build_knative_eventing
    step jaeger build_jaeger
    # The real node (test/e2e/real-node.test.ts): after kubernetes, whose work dir and build
    # cache the kubelet shares; ~2 min for kubelet + kube-proxy, ~3 min cold for CoreDNS.
    step node build_node
    # Knative Serving as pods on the real node (test/e2e/serving-pods.test.ts).
    step knative-serving-images build_knative_serving_images
    # Knative Eventing as pods on the real node (test/e2e/broker-pods.test.ts).
    step knative-eventing-images build_knative_eventing_images
    # Only the kn plugin test uses kn: without its source here, that test alone fails, saying so.
    if kn_source_missing; then
      echo "build-binaries: kn not built: no source for knative/client $KN_VERSION ($kn_source_hint)" >&2
    else
      step kn build_kn
    fi
    ;;
  *) die "unknown component '$what' (all|quickstart|quickstart-broker|kubernetes|etcd|kwok|knative-serving|knative-eventing|nats|kn|jaeger|node|node-images|knative-serving-images|knative-eventing-images)" ;;
esac
