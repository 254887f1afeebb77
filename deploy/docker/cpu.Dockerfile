# syntax=docker/dockerfile:1
# rnnserve for CPU hosts: serves /models (models/examples baked in) over gRPC on 8500, HTTP/REST
# (TF Serving's REST API and KServe v2 REST) on 8501 and Prometheus metrics on 8502.
#
#   docker build -f deploy/docker/cpu.Dockerfile -t rnnserve:cpu .
#   docker run --rm -p 127.0.0.1:8500:8500 -p 127.0.0.1:8501:8501 -p 127.0.0.1:8502:8502 rnnserve:cpu
# A model repository mounted at /models (DIR/<model>/<version>/<file>: from the repository root
# models/examples is one, models/ is not; put yours in its place):
#   docker run --rm -p 127.0.0.1:8500:8500 -v "$PWD/models/examples:/models:ro" rnnserve:cpu
# Arguments after the image replace CMD's flags: repeat those you keep (see CMD below).
#
# Build arguments:
#   BASE_IMAGE  the Debian (or Ubuntu) image both stages start from
#   CPU_ARCH    -march= of the CPU kernels: a portable baseline, never the build machine's
#               (x86-64-v3: AVX2 + FMA, Haswell and later; x86-64-v2 for older CPUs)
#   JOBS        parallel compile jobs
#   CCACHE_DIR  where ccache keeps its files (below)
# With BuildKit or podman, compiler output is kept in a cache mount (ccache), so a rebuild
# after a source change recompiles only what changed.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG CPU_ARCH=x86-64-v3
ARG JOBS=4
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY deploy/install_deps.sh deploy/install_deps.sh
RUN deploy/install_deps.sh --serve && rm -rf /var/lib/apt/lists/*
COPY CMakeLists.txt CMakePresets.json ./
COPY proto proto
COPY engine engine
COPY models models
COPY server server
COPY client client
COPY deploy/docker/runtime_packages.sh deploy/docker/runtime_packages.sh
# CCACHE_DIR: the cache mount below, or a host directory given with `podman build -v
# DIR:/host-ccache --build-arg CCACHE_DIR=/host-ccache` (the deploy tests pass the host's
# ccache, so CI's cache of it serves the image builds too). Paths are hashed relative to /src.
ARG CCACHE_DIR=/ccache
ENV CCACHE_DIR=${CCACHE_DIR} CCACHE_BASEDIR=/src
RUN --mount=type=cache,target=/ccache,id=rnnserve-ccache \
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRNNSERVE_CPU_ARCH="${CPU_ARCH}" \
      -DRNNSERVE_WITH_CUDA=OFF -DRNNSERVE_BUILD_TESTS=OFF -DRNNSERVE_BUILD_BENCH=OFF \
    && cmake --build build -j "${JOBS}" --target rnnserve rnnserve-cli \
    && mkdir -p /out/bin \
    && strip -o /out/bin/rnnserve build/server/rnnserve \
    && strip -o /out/bin/rnnserve-cli build/client/rnnserve-cli \
    && deploy/docker/runtime_packages.sh /out/bin/* >/out/runtime-packages.txt \
    && cat /out/runtime-packages.txt

FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
# The shared libraries the binaries load (runtime_packages.sh lists them from ldd), and tini
# as PID 1: it forwards SIGTERM to rnnserve (which drains) and reaps the model-check children.
# Versions are those of BASE_IMAGE's release, the same the build stage compiled against.
# hadolint ignore=DL3008
RUN apt-get update \
    && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
    && groupadd --system --gid 10001 rnnserve \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin rnnserve
COPY --from=build /out/bin/ /usr/local/bin/
COPY models/examples /models
USER 10001:10001
EXPOSE 8500 8501 8502
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["rnnserve-cli", "health", "--server", "127.0.0.1:8500", "--timeout-ms", "3000"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "rnnserve"]
CMD ["--model-repository", "/models", "--address", "0.0.0.0", "--metrics-address", "0.0.0.0", "--port", "8500", \
     "--http-port", "8501", "--metrics-port", "8502", "--log-level", "info"]
