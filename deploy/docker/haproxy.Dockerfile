# HAProxy from Debian's package, in front of rnnserve replicas that share stateful sequences
# (deploy/compose.scale-out.yaml, deploy/k8s/scale-out; docs/scale-out.md). The configuration is
# mounted at /etc/haproxy/haproxy.cfg.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# The package makes a system user `haproxy`; it gets a fixed uid so that USER is numeric.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/* \
    && groupmod --gid 10003 haproxy && usermod --uid 10003 --gid 10003 haproxy
USER 10003
EXPOSE 8500
ENTRYPOINT ["/usr/sbin/haproxy", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
