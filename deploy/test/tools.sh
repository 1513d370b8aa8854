#!/usr/bin/env bash
# deploy/test/tools.sh: the tools the deployment test (manifests.test.ts)
# needs, installed once under .state/tools (git-ignored), from the package
# registries only:
#   kustomize             built from its Go module (the Go module proxy)
#   Kubernetes schemas    the strict JSON schemas that the PyPI package
#                         kubernetes-validate ships, for the versions below
#   Compose schema        schema/compose-spec.json of the Go module
#                         compose-spec/compose-go, the one Docker Compose
#                         itself validates with
#   dockerfile-check      deploy/test/dockerfile-check, built on BuildKit's
#                         Dockerfile parser and linter (Go modules)
# Prints `name=path` lines on stdout; progress goes to stderr. Safe to run
# concurrently (a lock) and again (a no-op once installed). A cold install
# takes about a minute, mostly building kustomize.
set -euo pipefail

KUSTOMIZE_VERSION=v5.8.2 # v5.8.3 needs Go 1.27
KUBERNETES_VALIDATE_VERSION=1.37.0
# The oldest Kubernetes the manifests support, and the newest in that package.
KUBERNETES_VERSIONS=(1.30.0 1.37.0)
COMPOSE_GO_VERSION=v2.16.2

REPO_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS_DIR=${DEPLOY_TOOLS_DIR:-$REPO_ROOT/.state/tools}

log() { printf '[deploy-tools] %s\n' "$*" >&2; }
die() {
  printf '[deploy-tools] ERROR: %s\n' "$*" >&2
  exit 1
}

mkdir -p "$TOOLS_DIR"
exec 9>"$TOOLS_DIR/.lock"
flock 9

KUSTOMIZE=$TOOLS_DIR/kustomize-$KUSTOMIZE_VERSION/kustomize
SCHEMAS=$TOOLS_DIR/kubernetes-json-schema-$KUBERNETES_VALIDATE_VERSION
COMPOSE_SCHEMA=$TOOLS_DIR/compose-spec-$COMPOSE_GO_VERSION.json
DOCKERFILE_CHECK_SRC=$REPO_ROOT/deploy/test/dockerfile-check
# Rebuilt whenever its sources change.
DOCKERFILE_CHECK=$TOOLS_DIR/dockerfile-check-$(cat "$DOCKERFILE_CHECK_SRC"/go.mod "$DOCKERFILE_CHECK_SRC"/go.sum "$DOCKERFILE_CHECK_SRC"/*.go | sha256sum | cut -c1-12)/dockerfile-check

# Builds into a temporary folder and renames, so an interrupted run leaves nothing half-made.
install_kustomize() {
  [[ -x $KUSTOMIZE ]] && return 0
  command -v go >/dev/null || die "Go 1.26 or newer is needed to build kustomize (https://go.dev/dl/)"
  local started=$SECONDS tmp
  log "building kustomize $KUSTOMIZE_VERSION with go install (once; about a minute)"
  tmp=$(mktemp -d "$TOOLS_DIR/.kustomize.XXXXXX")
  GOBIN=$tmp GOFLAGS=-buildvcs=false go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION" >&2 ||
    { rm -rf "$tmp"; die "go install of kustomize failed"; }
  rm -rf "$(dirname "$KUSTOMIZE")"
  mv "$tmp" "$(dirname "$KUSTOMIZE")"
  log "kustomize built in $((SECONDS - started)) s"
}

install_kubernetes_schemas() {
  local version missing=()
  for version in "${KUBERNETES_VERSIONS[@]}"; do
    [[ -f $SCHEMAS/v$version-local-strict/_definitions.json ]] || missing+=("$version")
  done
  ((${#missing[@]} == 0)) && return 0
  command -v python3 >/dev/null || die "python3 with pip is needed to fetch the Kubernetes schemas"
  local started=$SECONDS tmp
  log "fetching the Kubernetes JSON schemas (kubernetes-validate $KUBERNETES_VALIDATE_VERSION from PyPI) for ${missing[*]}"
  tmp=$(mktemp -d "$TOOLS_DIR/.schemas.XXXXXX")
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp/wheel" \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2 ||
    { rm -rf "$tmp"; die "pip download of kubernetes-validate failed"; }
  # Only the strict schemas (unknown fields are errors) of the versions we test.
  python3 - "$tmp/wheel"/*.whl "$tmp/out" "${missing[@]}" <<'EOF' || { rm -rf "$tmp"; die "unpacking the schemas failed"; }
import sys, zipfile
wheel, out, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
prefix = 'kubernetes_validate/kubernetes-json-schema/'
with zipfile.ZipFile(wheel) as archive:
    for version in versions:
        folder = f'{prefix}v{version}-local-strict/'
        members = [name for name in archive.namelist() if name.startswith(folder) and name.endswith('.json')]
        if not members:
            sys.exit(f'kubernetes-validate has no schemas for Kubernetes {version}')
        for name in members:
            archive.extract(name, out)
EOF
  mkdir -p "$SCHEMAS"
  for version in "${missing[@]}"; do
    rm -rf "$SCHEMAS/v$version-local-strict"
    mv "$tmp/out/kubernetes_validate/kubernetes-json-schema/v$version-local-strict" "$SCHEMAS/"
  done
  rm -rf "$tmp"
  log "Kubernetes schemas ready in $((SECONDS - started)) s"
}

install_compose_schema() {
  [[ -f $COMPOSE_SCHEMA ]] && return 0
  command -v go >/dev/null || die "Go is needed to fetch the Compose schema (go mod download)"
  local module_dir
  log "fetching the Compose Specification schema (compose-go $COMPOSE_GO_VERSION)"
  module_dir=$(cd "$TOOLS_DIR" && go mod download -json "github.com/compose-spec/compose-go/v2@$COMPOSE_GO_VERSION" |
    node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).Dir));') ||
    die "go mod download of compose-go failed"
  [[ -f $module_dir/schema/compose-spec.json ]] || die "compose-go $COMPOSE_GO_VERSION has no schema/compose-spec.json"
  cp "$module_dir/schema/compose-spec.json" "$COMPOSE_SCHEMA.tmp"
  mv "$COMPOSE_SCHEMA.tmp" "$COMPOSE_SCHEMA"
}

install_dockerfile_check() {
  [[ -x $DOCKERFILE_CHECK ]] && return 0
  command -v go >/dev/null || die "Go is needed to build deploy/test/dockerfile-check"
  local started=$SECONDS tmp
  log "building deploy/test/dockerfile-check (once)"
  tmp=$(mktemp -d "$TOOLS_DIR/.dockerfile-check.XXXXXX")
  (cd "$DOCKERFILE_CHECK_SRC" && GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$tmp/dockerfile-check" .) >&2 ||
    { rm -rf "$tmp"; die "building dockerfile-check failed"; }
  rm -rf "$TOOLS_DIR"/dockerfile-check-*
  mv "$tmp" "$(dirname "$DOCKERFILE_CHECK")"
  log "dockerfile-check built in $((SECONDS - started)) s"
}

install_kustomize
install_kubernetes_schemas
install_compose_schema
install_dockerfile_check

echo "kustomize=$KUSTOMIZE"
for version in "${KUBERNETES_VERSIONS[@]}"; do
  echo "kubernetes_schemas=$SCHEMAS/v$version-local-strict"
done
echo "compose_schema=$COMPOSE_SCHEMA"
echo "dockerfile_check=$DOCKERFILE_CHECK"
