# syntax=docker/dockerfile:1
# rnnserve for GPU hosts: the cuDNN engine (CUDA 13, cuDNN 9) beside the CPU engine. With a GPU
# (`docker run --gpus all`, or CDI: `podman run --device nvidia.com/gpu=all`) models whose
# instance group is KIND_GPU or KIND_AUTO run on it; without one the same image serves on the
# CPU engine, and `rnnserve-cli metadata` says which engine runs each layer.
#
#   docker build -f deploy/docker/gpu.Dockerfile -t rnnserve:gpu .
#   docker run --rm --gpus all -p 127.0.0.1:8500:8500 -p 127.0.0.1:8501:8501 -p 127.0.0.1:8502:8502 rnnserve:gpu
#
# Build arguments:
#   BUILD_IMAGE  CUDA 13 + cuDNN 9 development image (nvcc, headers) for the build stage
#   BASE_IMAGE   CUDA 13 + cuDNN 9 runtime image of the same distribution, for the final stage
#   CUDA_ARCHS   CMAKE_CUDA_ARCHITECTURES: the GPUs the kernels are compiled for. 80 and 86
#                Ampere, 89 Ada, 90 Hopper, 100 and 120 Blackwell (data centre, consumer); the
#                thread-block-cluster kernel runs only on sm_90+ (docs/deploy.md).
#   CPU_ARCH, JOBS  as in cpu.Dockerfile
# Target `gpu-tests` builds the gpu-labelled test binaries as well (deploy/docker/gpu_payload.sh
# copies them out with the server for a GPU machine that has no container engine).
ARG BUILD_IMAGE=nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04
ARG BASE_IMAGE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04

FROM ${BUILD_IMAGE} AS build
ARG CPU_ARCH=x86-64-v3
ARG CUDA_ARCHS=80;86;89;90;100;120
ARG JOBS=4
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY deploy/install_deps.sh deploy/install_deps.sh
RUN deploy/install_deps.sh --serve && rm -rf /var/lib/apt/lists/*
# Debian 12's CMake 3.25.1 sets a property on CUDA::nvToolsExt without checking that the
# target exists, and CUDA 13 ships no nvToolsExt library, so configuring fails. CMake 3.25.2
# checks first; the same check here (no change where the module has it or is another version).
RUN f=/usr/share/cmake-3.25/Modules/FindCUDAToolkit.cmake; \
    if [ -f "$f" ]; then sed -i 's/^\( *\)if(CMAKE_MINIMUM_REQUIRED_VERSION VERSION_GREATER_EQUAL 3.25)$/\1if(TARGET CUDA::nvToolsExt AND CMAKE_MINIMUM_REQUIRED_VERSION VERSION_GREATER_EQUAL 3.25)/' "$f"; fi
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
      -DRNNSERVE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS}" \
      -DRNNSERVE_BUILD_TESTS=OFF -DRNNSERVE_BUILD_BENCH=OFF | tee /tmp/configure.log \
    && grep -q 'building the GPU engine' /tmp/configure.log \
    && cmake --build build -j "${JOBS}" --target rnnserve rnnserve-cli \
    && mkdir -p /out/bin \
    && strip -o /out/bin/rnnserve build/server/rnnserve \
    && strip -o /out/bin/rnnserve-cli build/client/rnnserve-cli \
    && deploy/docker/runtime_packages.sh /out/bin/* >/out/runtime-packages.txt \
    && cat /out/runtime-packages.txt

# The gpu-labelled tests, built with the same compiler settings as the server above. They read
# fixtures under the source directory compiled in (/src): run them from a checkout linked there.
FROM build AS gpu-tests
ARG JOBS=4
COPY tests tests
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends libgtest-dev libgmock-dev \
    && rm -rf /var/lib/apt/lists/*
RUN --mount=type=cache,target=/ccache,id=rnnserve-ccache \
    cmake -S . -B build -DRNNSERVE_BUILD_TESTS=ON \
    && cmake --build build -j "${JOBS}" --target gpu_availability_test gpu_conformance_test \
       gpu_engine_test example_model_test gpu_layers_test gpu_fused_lstm_test gpu_torch_test \
       gpu_multi_gpu_test \
    && mkdir -p /out/tests \
    && for t in build/tests/gpu/gpu_*_test build/tests/unit/example_model_test; do strip -o "/out/tests/$(basename "$t")" "$t"; done

FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
# As in cpu.Dockerfile: the binaries' shared libraries (the CUDA ones come with BASE_IMAGE),
# tini as PID 1, a non-root user.
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
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
  CMD ["rnnserve-cli", "health", "--server", "127.0.0.1:8500", "--timeout-ms", "3000"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "rnnserve"]
CMD ["--model-repository", "/models", "--address", "0.0.0.0", "--metrics-address", "0.0.0.0", "--port", "8500", \
     "--http-port", "8501", "--metrics-port", "8502", "--log-level", "info"]
