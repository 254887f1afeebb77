# Prometheus from Debian's package, for the compose stack (deploy/compose.yaml) where the
# upstream prom/prometheus image cannot be pulled. The configuration is mounted at
# /etc/prometheus (deploy/compose/prometheus.yml and deploy/prometheus/rules).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# The package makes a system user `prometheus`; it gets a fixed uid so that USER is numeric.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && groupmod --gid 10002 prometheus && usermod --uid 10002 --gid 10002 prometheus \
    && mkdir -p /prometheus && chown -R 10002:10002 /prometheus /var/lib/prometheus
USER 10002
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", \
     "--web.listen-address=:9090", "--web.enable-lifecycle"]
