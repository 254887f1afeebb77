#!/usr/bin/env bash
# Makes the base images the Dockerfiles build on, from Debian packages and the host's CUDA, for
# machines that reach Debian's mirror but no container registry. Where a registry is reachable,
# skip this: the Dockerfiles' defaults (debian:bookworm-slim, nvidia/cuda) are pulled instead.
#
#   deploy/docker/make_base.sh          localhost/debian:bookworm (a slim Debian 12)
#   deploy/docker/make_base.sh --cuda   also localhost/cuda:13-cudnn9-devel and -runtime, with
#                                       the CUDA runtime, cuBLAS, cuDNN (and nvcc for -devel)
#                                       copied from $CUDA_HOME (default /usr/local/cuda)
#
# The Debian root is kept as a tarball under $RNNSERVE_CACHE (default ~/.cache/rnnserve), so a
# rerun only imports it (seconds). Images that exist already are kept. Needs root, podman and
# mmdebstrap (deploy/install_deps.sh --containers).
set -euo pipefail

cache="${RNNSERVE_CACHE:-$HOME/.cache/rnnserve}"
mkdir -p "$cache"
tarball="$cache/debian-bookworm-slim.tar"

have_image() { podman image exists "$1"; }

if ! have_image localhost/debian:bookworm; then
  if [ ! -s "$tarball" ]; then
    # The machine's own mirrors (they may be a local proxy or a snapshot): the URIs of its
    # deb822 sources, or of sources.list.
    mirror="" security=""
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
      [ -r "$f" ] || continue
      for uri in $(sed -n 's/^URIs:[[:space:]]*//p; s/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' "$f"); do
        case "$uri" in
          *security*) [ -n "$security" ] || security="$uri" ;;
          *) [ -n "$mirror" ] || mirror="$uri" ;;
        esac
      done
    done
    mirror="${mirror:-http://deb.debian.org/debian}"
    security="${security:-http://deb.debian.org/debian-security}"
    echo "make_base: mmdebstrap bookworm from $mirror (once; cached at $tarball)"
    # Slim like debian:bookworm-slim: no docs, man pages or locales, no apt lists.
    # ca-certificates (with openssl and perl, ~50 MB) only where a mirror needs https.
    include=()
    case "$mirror $security" in *https:*) include=(--include=ca-certificates) ;; esac
    # Merged /usr set up by mmdebstrap's hook, so that usrmerge (and with it perl) stays out.
    hooks=/usr/share/mmdebstrap/hooks/merged-usr
    [ -d "$hooks" ] && include+=(--hook-dir="$hooks")
    mmdebstrap --variant=minbase "${include[@]}" --format=tar \
      --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      bookworm "$cache/partial.tar" \
      "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
      "deb $security bookworm-security main"
    mv "$cache/partial.tar" "$tarball"
  fi
  podman import --change 'CMD ["/bin/bash"]' "$tarball" localhost/debian:bookworm >/dev/null
  echo "make_base: localhost/debian:bookworm"
fi

[ "${1:-}" = "--cuda" ] || exit 0

# CUDA bases: the same Debian with the host's CUDA 13 files. -runtime carries only the shared
# libraries rnnserve loads (cudart, cuBLAS/cuBLASLt, cuDNN and the NVRTC that cuDNN's runtime
# compiled engines use); -devel adds nvcc, headers and the static runtime for the build stage.
cuda="$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")"
[ -x "$cuda/bin/nvcc" ] || { echo "make_base: no nvcc under $cuda" >&2; exit 1; }
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/runtime/lib" "$ctx/devel"
libdir="$cuda/lib64"
[ -e "$libdir/libcudart.so" ] || libdir="$cuda/lib"
for pattern in 'libcudart.so*' 'libcublas.so*' 'libcublasLt.so*' 'libcudnn*.so*' \
               'libnvrtc*.so*' 'libnvJitLink.so*'; do
  find -L "$libdir" -maxdepth 1 -name "$pattern" -exec cp -a {} "$ctx/runtime/lib/" \;
done
# The linker names (libX.so) belong to -devel only.
find "$ctx/runtime/lib" -name '*.so' -delete

if ! have_image localhost/cuda:13-cudnn9-runtime; then
  cat >"$ctx/runtime.Dockerfile" <<'EOF'
FROM localhost/debian:bookworm
COPY runtime/lib/ /usr/local/cuda/lib64/
RUN echo /usr/local/cuda/lib64 >/etc/ld.so.conf.d/cuda.conf && ldconfig
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
EOF
  podman build --format docker -t localhost/cuda:13-cudnn9-runtime \
    -f "$ctx/runtime.Dockerfile" "$ctx"
fi

if ! have_image localhost/cuda:13-cudnn9-devel; then
  # nvcc's own tree, the headers and the libraries (static runtime, stubs, linker names).
  for d in bin nvvm include; do cp -a "$cuda/$d" "$ctx/devel/"; done
  # lib, with lib64 and targets/x86_64-linux/{lib,include} linking to it, as CUDA lays it out.
  mkdir -p "$ctx/devel/lib" "$ctx/devel/targets/x86_64-linux"
  ln -s lib "$ctx/devel/lib64"
  ln -s ../../lib "$ctx/devel/targets/x86_64-linux/lib"
  ln -s ../../include "$ctx/devel/targets/x86_64-linux/include"
  for pattern in 'libcudart*' 'libcudadevrt.a' 'libculibos.a' 'libcublas*' 'libcudnn*' \
                 'libnvrtc*' 'libnvJitLink*' 'libnvptxcompiler*' 'stubs' 'cmake'; do
    find -L "$libdir" -maxdepth 1 -name "$pattern" -exec cp -a {} "$ctx/devel/lib/" \;
  done
  cat >"$ctx/devel.Dockerfile" <<'EOF'
FROM localhost/debian:bookworm
COPY devel/ /usr/local/cuda/
RUN echo /usr/local/cuda/lib >/etc/ld.so.conf.d/cuda.conf && ldconfig
ENV PATH=/usr/local/cuda/bin:$PATH
EOF
  podman build --format docker -t localhost/cuda:13-cudnn9-devel -f "$ctx/devel.Dockerfile" "$ctx"
fi
