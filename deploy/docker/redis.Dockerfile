# Redis from Debian's package (redis-server 7), the shared store of stateful sequences
# (--sequence-store; deploy/compose.scale-out.yaml, deploy/k8s/scale-out; docs/scale-out.md).
# Every write goes to an append-only file in /data, synced before Redis answers (appendfsync
# always), so a Redis restart loses no chunk that was answered; mount a volume at /data.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# The package makes a system user `redis`; it gets a fixed uid so that USER is numeric.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && groupmod --gid 10004 redis && usermod --uid 10004 --gid 10004 redis \
    && mkdir -p /data && chown 10004:10004 /data
USER 10004
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", \
            "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", "/data"]
