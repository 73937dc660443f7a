#!/usr/bin/env bash
# Proves the archives of build.sh are real images: starts a throwaway containerd (its own
# root, state and socket under a temporary directory, never the system's), imports every
# archive with `ctr -n k8s.io images import --all-platforms`, checks that each is named as
# build.sh documents, runs the pause image (it must exit 0 on SIGTERM) and the udp-echo image
# on the host network (one datagram on loopback must come back), then stops that containerd and
# removes its directories and mounts. Must run as root with containerd and runc installed
# (Debian: apt-get install -y containerd runc).
# Usage: selftest.sh [NAME...]   (no NAME: every image build.sh knows; builds missing ones)
# Env: SELFTEST_UDP_PORT (default 19001) - the loopback port the udp-echo check uses.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(pause operator stunnerd coredns udp-echo)

for tool in containerd ctr runc python3; do
  command -v "$tool" >/dev/null || { echo "selftest.sh: '$tool' not found (apt-get install -y containerd runc)" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "selftest.sh: must run as root (containerd)" >&2; exit 1; }

"$here/build.sh" "${names[@]}"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/images-selftest.XXXXXX")"
sock="$tmp/containerd.sock"
cd_pid=""
cleanup() {
  set +e
  if [[ -n "$cd_pid" ]]; then
    kill "$cd_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$cd_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$cd_pid" 2>/dev/null
  fi
  # the shims outlive containerd; stop the ones of this instance (their command line names our socket)
  local pid
  for pid in $(pgrep -f "containerd-shim.*$tmp" || true); do kill -9 "$pid" 2>/dev/null; done
  # deepest mounts first
  awk -v t="$tmp" 'index($2, t) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount -l "$m"
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# overlayfs when the kernel lets us mount it here, else the portable native snapshotter
snapshotter=overlayfs
mkdir -p "$tmp/ovl"/{l,u,w,m}
if ! mount -t overlay overlay -o "lowerdir=$tmp/ovl/l,upperdir=$tmp/ovl/u,workdir=$tmp/ovl/w" "$tmp/ovl/m" 2>/dev/null; then
  snapshotter=native
else
  umount "$tmp/ovl/m"
fi
rm -rf "$tmp/ovl"

cat > "$tmp/config.toml" <<CONF
version = 2
root = "$tmp/root"
state = "$tmp/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
CONF
containerd --config "$tmp/config.toml" >"$tmp/containerd.log" 2>&1 &
cd_pid=$!
ctr() { command ctr -a "$sock" -n k8s.io "$@"; }
for _ in $(seq 100); do
  ctr version >/dev/null 2>&1 && break
  kill -0 "$cd_pid" 2>/dev/null || { cat "$tmp/containerd.log" >&2; exit 1; }
  sleep 0.2
done
ctr version >/dev/null
echo "throwaway containerd at $sock (snapshotter $snapshotter)"

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# the reference each archive declares (what the import must name)
ref_of() { tar -xOf "$1" index.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifests"][0]["annotations"]["io.containerd.image.name"])'; }

for name in "${names[@]}"; do
  archive="$here/out/$name.tar"
  ref="$(ref_of "$archive")"
  ctr images import --all-platforms --snapshotter "$snapshotter" "$archive" >/dev/null
  if ctr images ls -q | grep -qxF "$ref"; then
    echo "ok: $name imported as $ref"
  else
    fail "$name: import did not create $ref (have: $(ctr images ls -q | tr '\n' ' '))"
  fi
done

# contains NAME: NAME is one of the images under test
contains() { [[ " ${names[*]} " == *" $1 "* ]]; }

if contains pause; then
  ref="$(ref_of "$here/out/pause.tar")"
  ctr run --rm --snapshotter "$snapshotter" "$ref" selftest-pause >"$tmp/pause.out" 2>&1 &
  run_pid=$!
  running=0
  for _ in $(seq 100); do
    [[ "$(ctr task ls 2>/dev/null | awk '$1=="selftest-pause" {print $3}')" == RUNNING ]] && { running=1; break; }
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.2
  done
  ctr task kill -s SIGTERM selftest-pause 2>/dev/null || true
  rc=0
  wait "$run_pid" || rc=$?
  if [[ $running -eq 1 && $rc -eq 0 ]]; then
    echo "ok: pause ran and exited 0 on SIGTERM"
  else
    fail "pause: running=$running, exit $rc: $(cat "$tmp/pause.out")"
  fi
fi

if contains udp-echo; then
  ref="$(ref_of "$here/out/udp-echo.tar")"
  port="${SELFTEST_UDP_PORT:-19001}"
  ctr run --rm --net-host --snapshotter "$snapshotter" --env "UDP_ECHO_PORT=$port" "$ref" selftest-echo \
    >"$tmp/echo.out" 2>&1 &
  run_pid=$!
  reply="$(python3 - "$port" <<'PY'
import socket, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
for _ in range(40):  # the container may still be starting: resend, bounded
    s.sendto(b"selftest-ping", ("127.0.0.1", port))
    try:
        print(s.recvfrom(2048)[0].decode()); break
    except socket.timeout:
        pass
PY
)"
  ctr task kill -s SIGTERM selftest-echo || true
  wait "$run_pid" || true
  if [[ "$reply" == *selftest-ping ]]; then echo "ok: udp-echo answered '$reply'"; else fail "udp-echo: no echo (got '$reply'): $(cat "$tmp/echo.out")"; fi
fi

if [[ $failures -ne 0 ]]; then
  echo "--- containerd log" >&2; tail -n 30 "$tmp/containerd.log" >&2
  exit 1
fi
echo "selftest: all ${#names[@]} image(s) ok"
