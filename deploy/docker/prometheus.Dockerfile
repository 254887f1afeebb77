# Prometheus from Debian's package, for the compose stack (deploy/compose.yaml) where the
# upstream prom/prometheus image cannot be pulled. The configuration is mounted at
# /etc/prometheus (deploy/compose/prometheus.yml and deploy/prometheus/rules).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# The package's postinst keeps a `prometheus` user that exists; a fixed uid makes USER numeric.
# hadolint ignore=DL3008
RUN useradd --system --uid 10002 --home-dir /var/lib/prometheus --shell /usr/sbin/nologin prometheus \
    && apt-get update \
    && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
USER 10002
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", \
     "--web.listen-address=:9090", "--web.enable-lifecycle"]
