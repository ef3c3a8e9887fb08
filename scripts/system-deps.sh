#!/usr/bin/env bash
# The Debian packages the tests need besides Node, Go and Python, installed when missing (as root,
# or through sudo), then a check of the toolchain versions. `npm test` runs this first (pretest),
# and so does .ci/run; quick and quiet when everything is there.
# `system-deps.sh real-node`: only the real node's packages (and buildah, which builds its images),
# without the toolchain check: what `npm run quickstart` installs, as root, before it starts one.
set -euo pipefail
die() { echo "system-deps: $*" >&2; exit 1; }
scope="${1:-all}"
case "$scope" in all|real-node) ;; *) die "usage: system-deps.sh [real-node]" ;; esac

real_node_packages() {
  # The real node (devcluster/node.ts): containerd with its CRI plugin, runc, the CNI plugins
  # (bridge, host-local, portmap, loopback) and iptables for kube-proxy and the bridge's guard.
  # ip: the node's network setup, and the e2e suite's network namespace for the Broker's channel
  # dispatcher. buildah (no Docker daemon) builds the node's images and `npm run image`'s, and the
  # install tests run the image with it.
  command -v containerd >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v buildah >/dev/null 2>&1 || need+=(buildah)
}

install_needed() {
  [ "${#need[@]}" -gt 0 ] || return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # (phase runs this under ||, where set -e does not apply: fail explicitly)
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" || die "apt-get install ${need[*]} failed"
}

system_packages() {
  local need=()
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
  command -v node >/dev/null 2>&1 || need+=(nodejs npm)
  # strip trims the Node binary in the image's base (buildah, below, builds it).
  command -v strip >/dev/null 2>&1 || need+=(binutils)
  # The push test copies the image into a real registry on 127.0.0.1, as the install docs say.
  command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
  command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
  # The Python example hook runs from a virtualenv (python3-venv brings ensurepip on Debian).
  command -v python3 >/dev/null 2>&1 || need+=(python3)
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
  # The observability tests start Prometheus themselves (never the package's service) and run promtool.
  command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
  real_node_packages
  install_needed
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 20 ] || die "Node.js >= 20 is needed (found $(node --version))"
  command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: Go >= 1.24 builds the control-plane binaries"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "Python >= 3.10 is needed for examples/python-binding-hook (found $(python3 --version 2>&1))"
  [ -n "${QUIET_SYSTEM_DEPS:-}" ] || echo "system-deps: node $(node --version), $(go version), $(python3 --version), $(openssl version | cut -d' ' -f1-2)"
}

if [ "$scope" = real-node ]; then
  need=()
  real_node_packages
  install_needed
else
  system_packages
fi
