#!/usr/bin/env bash
# Proves the archives of build.sh are real images: starts a throwaway containerd (its own
# root, state and socket under a temporary directory, never the system's), imports every
# archive with `ctr -n k8s.io images import --all-platforms`, checks that each is named as
# build.sh documents, runs the pause image (it must exit 0 on SIGTERM), the operator and
# stunnerd with --help (their libraries load), CoreDNS and udp-echo on the host network (one
# DNS query and one datagram on loopback must be answered), then stops that containerd and
# removes its directories and mounts. Must run as root with containerd and runc installed
# (Debian: apt-get install -y containerd runc).
# Usage: selftest.sh [NAME...]   (no NAME: every image build.sh knows; builds missing ones)
# Env: SELFTEST_UDP_PORT (default 19001), SELFTEST_DNS_PORT (default 19053) - the loopback
# ports of the udp-echo and coredns checks.
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
  images="$(ctr images ls -q)"
  if grep -qxF "$ref" <<<"$images"; then
    echo "ok: $name imported as $ref"
  else
    fail "$name: import did not create $ref (have: $(tr '\n' ' ' <<<"$images"))"
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
  ctr run --rm --net-host --snapshotter "$snapshotter" --env "UDP_ECHO_PORT=$port" --env UDP_ECHO_PREFIX_HOSTNAME=true "$ref" selftest-echo \
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
  if [[ "$reply" == ?*": selftest-ping" ]]; then echo "ok: udp-echo answered '$reply'"; else fail "udp-echo: no echo (got '$reply'): $(cat "$tmp/echo.out")"; fi
fi

# runs NAME ARG...: the image's program starts (its libraries load) and exits 0 with ARGs
runs() {
  local name="$1" ref rc=0
  shift
  contains "$name" || return 0
  ref="$(ref_of "$here/out/$name.tar")"
  ctr run --rm --snapshotter "$snapshotter" "$ref" "selftest-$name" "$@" >"$tmp/$name.out" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then echo "ok: $name runs '$*'"; else fail "$name: '$*' exited $rc: $(tail -n 5 "$tmp/$name.out")"; fi
}
runs operator /stunner-gateway-operator --help
runs stunnerd /usr/bin/stunnerd --help

if contains coredns; then
  # a hosts-only Corefile on a loopback port: one A query must get the address back
  ref="$(ref_of "$here/out/coredns.tar")"
  port="${SELFTEST_DNS_PORT:-19053}"
  mkdir -p "$tmp/coredns"
  printf '.:%s {\n  bind 127.0.0.1\n  errors\n  hosts {\n    192.0.2.53 selftest.example\n  }\n}\n' "$port" >"$tmp/coredns/Corefile"
  chmod -R a+rX "$tmp/coredns"
  ctr run --rm --net-host --snapshotter "$snapshotter" \
    --mount "type=bind,src=$tmp/coredns,dst=/etc/coredns,options=rbind:ro" \
    "$ref" selftest-coredns /coredns -conf /etc/coredns/Corefile >"$tmp/coredns.out" 2>&1 &
  run_pid=$!
  answer="$(python3 - "$port" <<'PY'
import socket, struct, sys
port = int(sys.argv[1])
name = b"".join(bytes([len(p)]) + p for p in b"selftest.example".split(b".")) + b"\0"
query = struct.pack(">HHHHHH", 0x5353, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
for _ in range(40):  # CoreDNS may still be starting: resend, bounded
    s.sendto(query, ("127.0.0.1", port))
    try:
        reply = s.recvfrom(4096)[0]
    except socket.timeout:
        continue
    # header, the echoed question, then an A record whose last 4 bytes are the address
    if struct.unpack(">H", reply[6:8])[0] >= 1:
        print(socket.inet_ntoa(reply[-4:]))
    break
PY
)"
  ctr task kill -s SIGTERM selftest-coredns 2>/dev/null || true
  wait "$run_pid" || true
  if [[ "$answer" == 192.0.2.53 ]]; then echo "ok: coredns answered selftest.example A $answer"; else fail "coredns: answer '$answer': $(tail -n 5 "$tmp/coredns.out")"; fi
fi

if [[ $failures -ne 0 ]]; then
  echo "--- containerd log" >&2; tail -n 30 "$tmp/containerd.log" >&2
  exit 1
fi
echo "selftest: all ${#names[@]} image(s) ok"
