#!/usr/bin/env bash
# What the polyglot example tests need besides npm packages, made once and kept in the cache:
# the Python example's virtualenv (made again only when its requirements.txt changes; its sha256
# is stamped inside, and test/integration/examples/ reads the same stamp) and the Go example's
# modules (the tests build it with GOPROXY=off). `npm test` runs this first (pretest), and so
# does .ci/run; silent-ish and quick when everything is already there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache="${KNATIVE_PRESTART_CACHE:-$HOME/.cache/knative-prestart}"
die() { echo "example-deps: $*" >&2; exit 1; }

python_venv() {
  local venv="$cache/venv" requirements="examples/python-binding-hook/requirements.txt" sum
  sum="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c '' 2>/dev/null && [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" = "$sum" ]; then
    return 0
  fi
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || die "Python >= 3.10 is needed for examples/python-binding-hook (found $(python3 --version 2>&1 || echo none))"
  python3 -c 'import ensurepip, venv' 2>/dev/null || die "python3 has no venv/ensurepip: apt-get install python3-venv"
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv $venv failed"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" || die "pip install -r $requirements failed"
  echo "$sum" > "$venv/.requirements.sha256"
  echo "example-deps: virtualenv $venv made from $requirements"
}

go_example_modules() {
  command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: Go >= 1.24 is needed"
  (cd examples/go-binding-hook && go mod download) || die "go mod download in examples/go-binding-hook failed"
}

python_venv
go_example_modules
