# The one `raftrain` binary in a small image, run as a non-root user.
#   docker build -t raftrain:0.1.0 .   (the tag deploy/kubernetes/ names: the workspace version)
# Build stage: a current stable toolchain; protoc comes vendored with the build.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p cli --bin raftrain \
    && install -D -m 0755 target/release/raftrain /out/raftrain

# Runtime stage: the binary, CA roots for TLS without --tls-ca, and nothing else.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 raftrain \
    && useradd --system --uid 10001 --gid raftrain --home-dir /var/lib/raftrain --create-home raftrain
COPY --from=build /out/raftrain /usr/local/bin/raftrain
USER 10001:10001
WORKDIR /var/lib/raftrain
# raftrain's ports are 7000-7299, below the Prometheus exporters' 9100-9999 (node_exporter's
# 9100): 7000 masters (gRPC), 7001 masters' Raft with --peer-listen, 7090 masters' metrics and
# health (--metrics-listen), 7100 pservers (gRPC), 7190 pservers' metrics, 7290 trainers'.
EXPOSE 7000 7001 7090 7100 7190 7290
ENTRYPOINT ["raftrain"]
CMD ["--help"]
