# The operator image, for people with Docker (BuildKit): `docker build -t IMAGE .`
# The release workflow (.github/workflows/release.yaml) builds this file and pushes
# ghcr.io/l7mp/stunner-gateway-operator-rs, the image deploy/manifests and the Helm chart name.
# Test machines without Docker build an equivalent image with tests/images/build.sh operator.

# Build stage: the workspace's own toolchain floor is Rust 1.92 (Cargo.toml rust-version).
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep crates and compiled dependencies between builds; the binary is copied out
# of the cached target directory because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p stunner-gateway-operator \
 && install -D -m 0755 target/release/stunner-gateway-operator /out/stunner-gateway-operator

# Runtime stage: glibc and libgcc only, no shell, uid/gid 65532 (nonroot).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/stunner-gateway-operator /stunner-gateway-operator
USER 65532:65532
ENTRYPOINT ["/stunner-gateway-operator"]
