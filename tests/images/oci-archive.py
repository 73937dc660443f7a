#!/usr/bin/env python3
"""Writes a single-layer OCI image-layout tarball from a list of files, deterministically.

Why: these test machines have no Docker engine and no registry, so images for the test
cluster are assembled from binaries built here and imported with
`ctr -n k8s.io images import --all-platforms FILE`. The same inputs always give the same
bytes (fixed mtimes, uid/gid 0, sorted entries, gzip without a timestamp), so the image
digest changes only when a file does.

Usage:
  oci-archive.py --ref REF --out FILE [--entrypoint ARG]... [--cmd ARG]... [--user U]
                 [--env K=V]... [--expose PORT/PROTO]...
                 [--file SRC=DST[:MODE]]... [--dir DST[:MODE]]... [--symlink TARGET=DST]...
DST paths are absolute inside the image; parent directories are added (mode 0755).
MODE is octal; without it a file keeps its executable bits (0755 or 0644).
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import sys
import tarfile

# Refuse to pack anything absurd (a wrong SRC such as a whole disk image); test images are small.
MAX_FILE_BYTES = 512 * 1024 * 1024

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def go_arch():
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)


def split_pair(value, what):
    if "=" not in value:
        sys.exit(f"oci-archive: {what} wants A=B, got {value!r}")
    left, right = value.split("=", 1)
    return left, right


class Layer:
    """The root file system: a map from image path to tar entry, written in sorted order."""

    def __init__(self):
        self.entries = {}

    def _parents(self, path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.add_dir("/" + "/".join(parts[:i]))

    def _info(self, path, kind, mode):
        info = tarfile.TarInfo(path.strip("/"))
        info.type = kind
        info.mode = mode
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    def add_dir(self, path, mode=0o755):
        if path.strip("/") and path not in self.entries:
            self._parents(path)
            self.entries[path] = (self._info(path, tarfile.DIRTYPE, mode), None)

    def add_file(self, src, dst, mode=None):
        size = os.path.getsize(src)
        if size > MAX_FILE_BYTES:
            sys.exit(f"oci-archive: {src} is {size} bytes, over the {MAX_FILE_BYTES} limit")
        with open(src, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
        if mode is None:
            mode = 0o755 if os.stat(src).st_mode & 0o111 else 0o644
        self._parents(dst)
        info = self._info(dst, tarfile.REGTYPE, mode)
        info.size = len(data)
        self.entries[dst] = (info, data)

    def add_symlink(self, target, dst):
        self._parents(dst)
        info = self._info(dst, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.entries[dst] = (info, None)

    def tar_bytes(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries):
                info, data = self.entries[path]
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return buf.getvalue()


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def descriptor(media_type, digest_data, **extra):
    digest, data = digest_data
    d = {"mediaType": media_type, "digest": digest, "size": len(data)}
    d.update(extra)
    return d


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main():
    p = argparse.ArgumentParser(description="Write an OCI image-layout tarball.")
    p.add_argument("--ref", required=True, help="full image reference, e.g. registry.k8s.io/pause:3.10")
    p.add_argument("--out", required=True)
    p.add_argument("--entrypoint", action="append", default=[])
    p.add_argument("--cmd", action="append", default=[])
    p.add_argument("--user", default="")
    p.add_argument("--workdir", default="/")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--expose", action="append", default=[])
    p.add_argument("--file", action="append", default=[])
    p.add_argument("--dir", action="append", default=[])
    p.add_argument("--symlink", action="append", default=[])
    p.add_argument("--arch", default=go_arch())
    args = p.parse_args()

    layer = Layer()
    for spec in args.dir:
        path, _, mode_text = spec.partition(":")
        layer.add_dir(path, int(mode_text, 8) if mode_text else 0o755)
    for spec in args.file:
        src, dst = split_pair(spec, "--file")
        mode = None
        if ":" in dst:
            dst, mode_text = dst.rsplit(":", 1)
            mode = int(mode_text, 8)
        if not dst.startswith("/"):
            sys.exit(f"oci-archive: destination {dst!r} must be absolute")
        layer.add_file(src, dst, mode)
    for spec in args.symlink:
        target, dst = split_pair(spec, "--symlink")
        layer.add_symlink(target, dst)

    tar = layer.tar_bytes()
    layer_gz = blob(gzip.compress(tar, compresslevel=6, mtime=0))
    diff_id = "sha256:" + hashlib.sha256(tar).hexdigest()

    env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + args.env
    config = {"Env": env, "WorkingDir": args.workdir}
    if args.entrypoint:
        config["Entrypoint"] = args.entrypoint
    if args.cmd:
        config["Cmd"] = args.cmd
    if args.user:
        config["User"] = args.user
    if args.expose:
        config["ExposedPorts"] = {port: {} for port in args.expose}
    image_config = blob(canonical_json({
        "architecture": args.arch,
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "tests/images/oci-archive.py"}],
    }))
    manifest = blob(canonical_json({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": descriptor(OCI_CONFIG, image_config),
        "layers": [descriptor(OCI_LAYER, layer_gz)],
    }))
    index = canonical_json({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [descriptor(
            OCI_MANIFEST, manifest,
            platform={"architecture": args.arch, "os": "linux"},
            # containerd names the imported image after the first; OCI tools after the second.
            annotations={"io.containerd.image.name": args.ref,
                         "org.opencontainers.image.ref.name": args.ref},
        )],
    })

    files = [("oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"})), ("index.json", index)]
    for digest, data in (layer_gz, image_config, manifest):
        files.append(("blobs/sha256/" + digest.split(":", 1)[1], data))

    tmp = args.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as out:
        for dirname in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(dirname)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            out.addfile(info)
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            out.addfile(info, io.BytesIO(data))
    os.replace(tmp, args.out)
    print(f"{args.out}: {args.ref} {manifest[0]}")


if __name__ == "__main__":
    main()
