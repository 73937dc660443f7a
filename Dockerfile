# The operator image, for people with Docker (BuildKit): `docker build -t IMAGE .`
# The release workflow (.github/workflows/release.yaml) builds this file and pushes
# ghcr.io/l7mp/stunner-gateway-operator-rs, the image deploy/manifests and the Helm chart name.
# Test machines without Docker build an equivalent image with tests/images/build.sh operator.

# Build stage, on the machine that builds (BUILDPLATFORM), for the platform asked for
# (TARGETARCH): linux/amd64 natively, linux/arm64 cross-compiled with Debian's aarch64 gcc
# (ring's C code and the linker) at native speed, not under emulation. The workspace's own
# toolchain floor is Rust 1.92 (Cargo.toml rust-version).
FROM --platform=$BUILDPLATFORM docker.io/library/rust:1.95-bookworm AS build
ARG TARGETARCH
RUN case "$TARGETARCH" in \
      amd64) echo x86_64-unknown-linux-gnu > /rust-target ;; \
      arm64) echo aarch64-unknown-linux-gnu > /rust-target \
        && apt-get update \
        && apt-get install -y --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross \
        && rm -rf /var/lib/apt/lists/* ;; \
      *) echo "no Rust target for TARGETARCH=$TARGETARCH (linux/amd64 and linux/arm64 are built)" >&2; exit 1 ;; \
    esac \
 && rustup target add "$(cat /rust-target)"
ENV CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
WORKDIR /src
COPY . .
# Cache mounts keep crates and compiled dependencies between builds (one target directory per
# architecture); the binary is copied out of the cached target directory because cache mounts
# are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=cargo-target-$TARGETARCH \
    target="$(cat /rust-target)" \
 && cargo build --release --locked -p stunner-gateway-operator --target "$target" \
 && install -D -m 0755 "target/$target/release/stunner-gateway-operator" /out/stunner-gateway-operator

# Runtime stage, of the target platform (distroless publishes both): glibc and libgcc only,
# no shell, uid/gid 65532 (nonroot). Bookworm's glibc, as the cross toolchain's.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/stunner-gateway-operator /stunner-gateway-operator
USER 65532:65532
ENTRYPOINT ["/stunner-gateway-operator"]
