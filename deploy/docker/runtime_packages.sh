#!/usr/bin/env bash
# Prints, one a line, the Debian/Ubuntu packages that hold the shared libraries the given
# binaries load (ldd), so an image's runtime stage installs those and no -dev package.
# Libraries outside dpkg's database (CUDA copied into a base image, /usr/local) are skipped:
# the runtime base carries them.
#   deploy/docker/runtime_packages.sh BINARY...
set -euo pipefail
for bin in "$@"; do
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  # dpkg knows the path the package installed (/lib or /usr/lib, before or after usrmerge).
  real="$(readlink -f "$lib")"
  for path in "$lib" "$real" "${lib/#\/lib\//\/usr\/lib\/}" "${real/#\/usr\/lib\//\/lib\/}"; do
    if owner="$(dpkg -S "$path" 2>/dev/null)"; then
      echo "${owner%%:*}"
      break
    fi
  done
done | sort -u
