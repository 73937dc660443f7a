#!/usr/bin/env bash
# Builds the container images of the single-node test cluster without Docker or a registry:
# each is an OCI image-layout tarball, out/<NAME>.tar, written by oci-archive.py from binaries
# built here, that `ctr -n k8s.io images import --all-platforms out/<NAME>.tar` names as below.
#   pause     registry.k8s.io/pause:3.10        pause/pause.c, gcc -static
#   operator  ghcr.io/l7mp/stunner-gateway-operator-rs:latest  (the Helm chart's default image)
#                                               the test suite's cargo build (debug, its debug
#                                               information stripped); the binary, the shared
#                                               libraries ldd lists, uid/gid 65532 nonroot
#   stunnerd  docker.io/l7mp/stunnerd:<tag>     (the operator's default dataplane image)
#                                               tests/interop/bin/stunnerd: upstream's
#                                               cmd/stunnerd at the version pinned in
#                                               tests/interop/go.mod, CGO_ENABLED=0
#   icetester docker.io/l7mp/icetester:<tag>    tests/interop/bin/icetester: upstream's
#                                               cmd/icetester at the version pinned in
#                                               tests/interop/go.mod (<tag> is that version
#                                               without its `v`), the peer upstream's
#                                               `stunnerctl icetest --ice-tester-image` runs
#   icetester-rs ghcr.io/l7mp/stunner-icetester-rs:<version>  our Rust icetester (client crate),
#                                               the default of our `stunnerctl icetest`
#                                               (DEFAULT_ICE_TESTER_REPOSITORY in its source,
#                                               <version> the workspace's crate version);
#                                               built in the operator's cargo invocation
#   coredns   registry.k8s.io/coredns/coredns:<v> cmd/coredns: the CoreDNS module (go.mod) with
#                                               the plugins a cluster DNS needs, CGO_ENABLED=0
#   udp-echo  localhost/stunner-test/udp-echo:latest  cmd/udp-echo, CGO_ENABLED=0
# Idempotent: an archive is rebuilt only when older than one of its inputs.
# OCI_ARCH=arm64 (on another machine): the operator image for arm64, out/operator-arm64.tar,
# cross-compiled as the Dockerfile does; it needs the Rust standard library of
# aarch64-unknown-linux-gnu (`rustup target add`, from static.rust-lang.org) and Debian's
# gcc-aarch64-linux-gnu and libc6-dev-arm64-cross, and says which is missing otherwise.
# Usage: build.sh [--force] [NAME...]   (no NAME: all of them)
#        build.sh --ref NAME               prints NAME's image reference (operator, stunnerd,
#                                          icetester, icetester-rs) and builds nothing
# Needs python3, gcc with a static libc (libc6-dev), go (module proxy reachable on first use),
# cargo and ldd.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$here/out"
work="$out/build"
mkdir -p "$work"

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

force=0
names=()
print_ref=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --ref) print_ref=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) names+=("$arg") ;;
  esac
done
all=(pause operator stunnerd icetester icetester-rs coredns udp-echo)
[[ ${#names[@]} -gt 0 ]] || names=("${all[@]}")

# fresh TARGET INPUT...: TARGET exists and is newer than every INPUT.
fresh() {
  local target="$1" f
  shift
  [[ $force -eq 0 && -e "$target" ]] || return 1
  for f in "$@"; do
    [[ "$target" -nt "$f" ]] || return 1
  done
}

pack() { python3 "$here/oci-archive.py" "$@"; }

# The Go sources of one command under cmd/, for freshness checks.
go_inputs() { find "$here/cmd/$1" -type f -name '*.go' -print; }

# go_build OUTPUT PKG: a static, stripped, reproducible binary from the tests/images module.
go_build() {
  (cd "$here" && CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -trimpath \
      -ldflags "-s -w ${3:-}" -o "$1.tmp" "$2")
  mv -f "$1.tmp" "$1"
}

build_pause() {
  local bin="$work/pause" tar="$out/pause.tar"
  fresh "$tar" "$here/pause/pause.c" "$here/oci-archive.py" "$here/build.sh" && return 2
  gcc -static -Os -Wall -Wextra -Werror -o "$bin" "$here/pause/pause.c"
  strip "$bin"
  pack --ref registry.k8s.io/pause:3.10 --out "$tar" --user 65535:65535 \
    --file "$bin=/pause" --entrypoint /pause
}

# The operator's reference: the Helm chart's default (image.repository:image.tag of values.yaml),
# the image deploy/manifests/operator.yaml names too (tests/deploy.rs pins both).
operator_ref() {
  local values="$root/deploy/helm/stunner-gateway-operator/values.yaml" repo tag
  repo="$(awk '/^image:/ {i=1; next} i && $1=="repository:" {print $2; exit}' "$values")"
  tag="$(awk '/^image:/ {i=1; next} i && $1=="tag:" {gsub(/"/, "", $2); print $2; exit}' "$values")"
  [[ -n "$repo" && -n "$tag" ]] || { echo "build.sh: no image.repository/image.tag in $values" >&2; return 1; }
  echo "$repo:$tag"
}

# The dataplane's reference: the operator's default stunnerd image (DEFAULT_IMAGE in
# src/render/deployment.rs, `pub` or `pub(crate)`), normalized the way containerd and the kubelet do (docker.io/).
stunnerd_ref() {
  local src="$root/src/render/deployment.rs" ref
  ref="$(sed -n 's/^pub\(([a-z]*)\)\{0,1\} const DEFAULT_IMAGE: &str = "\(.*\)";$/\2/p' "$src")"
  [[ -n "$ref" ]] || { echo "build.sh: no DEFAULT_IMAGE in $src" >&2; return 1; }
  case "${ref%%/*}" in
    *.*|*:*|localhost) ;;                                    # names a registry already
    *) [[ "$ref" == */* ]] && ref="docker.io/$ref" || ref="docker.io/library/$ref" ;;
  esac
  echo "$ref"
}

# Our icetester's reference: the repository stunnerctl defaults to (DEFAULT_ICE_TESTER_REPOSITORY)
# and the workspace's crate version, the tag stunnerctl appends to it.
icetester-rs_ref() {
  local src="$root/client/src/bin/stunnerctl/icetest_cluster/manifests.rs" repo version
  repo="$(sed -n 's/^pub const DEFAULT_ICE_TESTER_REPOSITORY: &str = "\(.*\)";$/\1/p' "$src")"
  version="$(awk '/^\[workspace.package\]/ {w=1; next} /^\[/ {w=0} w && $1=="version" {gsub(/"/, "", $3); print $3; exit}' "$root/Cargo.toml")"
  [[ -n "$repo" && -n "$version" ]] || { echo "build.sh: no DEFAULT_ICE_TESTER_REPOSITORY in $src or no version in Cargo.toml" >&2; return 1; }
  echo "$repo:$version"
}

# The binaries of the images built from this workspace (the operator, our icetester): the
# test suite's own debug build, `cargo build --workspace --all-targets`, the same units
# `cargo test --workspace --all-targets` builds, so that scripts/test compiles the workspace
# once (a release build would compile the whole dependency tree a second time, optimised). Real
# releases are built by the Dockerfile and the release workflow. cargo decides itself whether
# a binary is stale (a no-op of a few seconds when it is not).
cargo_test_build() {
  (cd "$root" && cargo build --workspace --all-targets --locked)
}

# stripped BIN: a copy of BIN without its debug information, in $work, for an image (the
# debug build's sections are most of its size); prints its path.
stripped() {
  local copy="$work/$(basename "$1")"
  if ! fresh "$copy" "$1"; then
    objcopy --strip-debug "$1" "$copy.tmp" && mv "$copy.tmp" "$copy" || return 1
  fi
  echo "$copy"
}

# The machine's architecture in Go's (and OCI's) words.
host_arch() {
  case "$(uname -m)" in x86_64|amd64) echo amd64 ;; aarch64|arm64) echo arm64 ;; *) uname -m ;; esac
}

# The operator image for arm64 on another machine: cross-compiled, with the shared libraries
# the binary names (and its loader) from the cross glibc. Returns 1, saying what is missing,
# where the toolchain does not allow it.
build_operator_arm64() {
  local triple=aarch64-unknown-linux-gnu sysroot=/usr/aarch64-linux-gnu missing=()
  [[ -d "$(rustc --print sysroot)/lib/rustlib/$triple/lib" ]] ||
    missing+=("the Rust standard library for $triple (rustup target add $triple; it is downloaded from static.rust-lang.org, which is not a package registry)")
  command -v aarch64-linux-gnu-gcc >/dev/null && [[ -d "$sysroot/lib" ]] ||
    missing+=("a cross gcc and glibc (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)")
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "build.sh: cannot cross-build the arm64 operator image here; missing:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    echo "  (the release workflow builds linux/arm64 from the Dockerfile, which installs both)" >&2
    return 1
  fi
  (cd "$root" && CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
      CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
      cargo build --release -p stunner-gateway-operator --locked --target "$triple")
  local bin="${CARGO_TARGET_DIR:-$root/target}/$triple/release/stunner-gateway-operator" tar="$out/operator-arm64.tar" ref
  ref="$(operator_ref)"
  fresh "$tar" "$bin" "$root/deploy/helm/stunner-gateway-operator/values.yaml" \
    "$here/oci-archive.py" "$here/build.sh" && return 2
  local files=(--file "$bin=/stunner-gateway-operator") lib loader
  # the libraries the binary names (DT_NEEDED), where Debian's arm64 glibc puts them
  while read -r lib; do
    files+=(--file "$(readlink -f "$sysroot/lib/$lib")=/lib/aarch64-linux-gnu/$lib")
  done < <(aarch64-linux-gnu-readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  loader="$(aarch64-linux-gnu-readelf -l "$bin" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')"
  files+=(--file "$(readlink -f "$sysroot/lib/$(basename "$loader")")=$loader")
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$work/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$work/group"
  pack --ref "$ref" --out "$tar" --arch arm64 \
    --user 65532:65532 --entrypoint /stunner-gateway-operator \
    --file "$work/passwd=/etc/passwd:644" --file "$work/group=/etc/group:644" \
    --dir /tmp:1777 --dir /home/nonroot "${files[@]}"
}

build_operator() {
  case "${OCI_ARCH:-$(host_arch)}" in
    "$(host_arch)") ;;
    arm64) build_operator_arm64; return ;;
    *) echo "build.sh: OCI_ARCH=$OCI_ARCH: only arm64 is cross-built" >&2; return 1 ;;
  esac
  local bin="${CARGO_TARGET_DIR:-$root/target}/debug/stunner-gateway-operator" tar="$out/operator.tar" ref
  ref="$(operator_ref)"
  cargo_test_build || return 1
  fresh "$tar" "$bin" "$root/deploy/helm/stunner-gateway-operator/values.yaml" \
    "$here/oci-archive.py" "$here/build.sh" && return 2
  local copy
  copy="$(stripped "$bin")" || return 1
  local files=(--file "$copy=/stunner-gateway-operator")
  # exactly the shared objects the binary loads: `libx.so => /path (addr)` and the loader `/path (addr)`
  local lib
  while read -r lib; do
    files+=(--file "$(readlink -f "$lib")=$lib")
  done < <(ldd "$bin" | awk '$2=="=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$work/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$work/group"
  pack --ref "$ref" --out "$tar" \
    --user 65532:65532 --entrypoint /stunner-gateway-operator \
    --file "$work/passwd=/etc/passwd:644" --file "$work/group=/etc/group:644" \
    --dir /tmp:1777 --dir /home/nonroot "${files[@]}"
}

build_stunnerd() {
  local bin="$root/tests/interop/bin/stunnerd" tar="$out/stunnerd.tar" ref
  # A failure fails the build: an image without this name is one the kubelet cannot find
  # (and, called under `||`, the function does not stop at it by itself).
  ref="$(stunnerd_ref)" || return 1
  # The interop harness's stunnerd: the pinned upstream version, static (CGO_ENABLED=0), so
  # the image and the interop tests run the same binary, built once.
  "$root/tests/interop/build.sh" >/dev/null
  fresh "$tar" "$bin" "$root/src/render/deployment.rs" "$here/oci-archive.py" "$here/build.sh" && return 2
  pack --ref "$ref" --out "$tar" --user 65532:65532 \
    --dir /tmp:1777 --file "$bin=/usr/bin/stunnerd" --entrypoint /usr/bin/stunnerd
}

# The upstream version tests/interop/go.mod pins, without its `v` (upstream's image tags).
interop_pin() {
  local pin
  pin="$(awk '$1=="require" && $2=="github.com/l7mp/stunner" {print $3; exit}
              $1=="github.com/l7mp/stunner" {print $2; exit}' "$root/tests/interop/go.mod")"
  [[ -n "$pin" ]] || { echo "build.sh: no github.com/l7mp/stunner version in tests/interop/go.mod" >&2; return 1; }
  echo "${pin#v}"
}

# Upstream's icetester image: upstream's name, the pinned version as its tag.
icetester_ref() {
  local tag
  tag="$(interop_pin)" || return 1
  echo "docker.io/l7mp/icetester:$tag"
}

# Upstream's ICE test peer, from the same module and build as the dataplane's stunnerd. The
# pod upstream's icetest makes runs `icetester` by name, so the image sets PATH.
build_icetester() {
  local bin="$root/tests/interop/bin/icetester" tar="$out/icetester.tar" ref
  ref="$(icetester_ref)" || return 1
  "$root/tests/interop/build.sh" >/dev/null
  fresh "$tar" "$bin" "$root/tests/interop/go.mod" "$here/oci-archive.py" "$here/build.sh" && return 2
  pack --ref "$ref" --out "$tar" --user 65532:65532 \
    --env PATH=/usr/local/bin:/usr/bin:/bin --dir /tmp:1777 \
    --file "$bin=/usr/bin/icetester" --entrypoint /usr/bin/icetester --expose 8089/tcp
}

# Our Rust icetester (client/src/bin/icetester), from the operator's cargo invocation (no
# second build); linked like the operator, so it ships the shared libraries ldd lists. The pod
# our icetest makes runs `icetester` by name, so PATH is set.
build_icetester-rs() {
  local bin="${CARGO_TARGET_DIR:-$root/target}/debug/icetester" tar="$out/icetester-rs.tar" ref lib
  ref="$(icetester-rs_ref)" || return 1
  cargo_test_build || return 1
  fresh "$tar" "$bin" "$root/Cargo.toml" "$root/client/src/bin/stunnerctl/icetest_cluster/manifests.rs" \
    "$here/oci-archive.py" "$here/build.sh" && return 2
  local copy
  copy="$(stripped "$bin")" || return 1
  local files=(--file "$copy=/usr/bin/icetester")
  while read -r lib; do
    files+=(--file "$(readlink -f "$lib")=$lib")
  done < <(ldd "$bin" | awk '$2=="=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
  pack --ref "$ref" --out "$tar" --user 65532:65532 \
    --env PATH=/usr/local/bin:/usr/bin:/bin --dir /tmp:1777 \
    --entrypoint /usr/bin/icetester --expose 8089/tcp "${files[@]}"
}

coredns_version() {
  awk '$1=="github.com/coredns/coredns" {print $2; exit}
       $1=="require" && $2=="github.com/coredns/coredns" {print $3; exit}' "$here/go.mod"
}

build_coredns() {
  local bin="$work/coredns" tar="$out/coredns.tar" version
  version="$(coredns_version)"
  mapfile -t srcs < <(go_inputs coredns)
  fresh "$tar" "${srcs[@]}" "$here/go.mod" "$here/go.sum" "$here/oci-archive.py" "$here/build.sh" && return 2
  go_build "$bin" ./cmd/coredns "-X github.com/coredns/coredns/coremain.GitCommit=proxy"
  pack --ref "registry.k8s.io/coredns/coredns:$version" --out "$tar" --user 65532:65532 \
    --file "$bin=/coredns" --entrypoint /coredns --expose 53/udp --expose 53/tcp
}

build_udp-echo() {
  local bin="$work/udp-echo" tar="$out/udp-echo.tar"
  mapfile -t srcs < <(go_inputs udp-echo)
  fresh "$tar" "${srcs[@]}" "$here/go.mod" "$here/oci-archive.py" "$here/build.sh" && return 2
  go_build "$bin" ./cmd/udp-echo
  pack --ref localhost/stunner-test/udp-echo:latest --out "$tar" --user 65532:65532 \
    --file "$bin=/udp-echo" --entrypoint /udp-echo --expose 9001/udp
}

if [[ $print_ref -eq 1 ]]; then
  [[ ${#names[@]} -eq 1 ]] && declare -F "${names[0]}_ref" >/dev/null ||
    { echo "build.sh: --ref takes one of: operator stunnerd icetester icetester-rs" >&2; exit 2; }
  "${names[0]}_ref"
  exit
fi

summary=()
failed=0
for name in "${names[@]}"; do
  if [[ -n "${OCI_ARCH:-}" && "$OCI_ARCH" != "$(host_arch)" && "$name" != operator ]]; then
    echo "build.sh: OCI_ARCH=$OCI_ARCH: only the operator image is cross-built" >&2
    exit 2
  fi
  if ! declare -F "build_$name" >/dev/null; then
    echo "build.sh: unknown image '$name' (known: ${all[*]})" >&2
    exit 2
  fi
  t0=$SECONDS
  rc=0
  "build_$name" || rc=$?
  case $rc in
    0) summary+=("  $name: built in $((SECONDS - t0))s") ;;
    2) summary+=("  $name: up to date") ;;
    *) summary+=("  $name: BUILD FAILED"); failed=1 ;;
  esac
done
echo "test images -> $out"
printf '%s\n' "${summary[@]}"
exit $failed
