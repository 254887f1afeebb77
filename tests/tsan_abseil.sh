#!/usr/bin/env bash
# Builds Debian's own abseil (the source package of the installed libabsl-dev, same version,
# same patches, same options.h) as shared libraries with -fsanitize=thread into
# build/tsan-absl, so that a TSan run can put build/tsan-absl/lib first in LD_LIBRARY_PATH and
# have our code and Debian's libgrpc++ both use an abseil whose absl::Mutex TSan can see.
#
#   tests/tsan_abseil.sh            # prints the lib dir; builds it first if it is missing
#
# Why: the server's locks (and gRPC's, which wrap absl::Mutex) lock and unlock inside
# libabsl_synchronization.so. Debian builds it without TSan, so TSan never sees those
# acquire/release pairs and reports a race on every guarded field.
#
# How the build matches Debian's: the flags are dpkg-buildflags' with the package's own
# DEB_BUILD_MAINT_OPTIONS (debian/rules), the CMake options are those debian/rules gives its
# shared build (-DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON, CMAKE_BUILD_TYPE=None as
# dh_auto_configure sets it), and Debian's patches set the SONAMEs (libabsl_*.so.20220623), the
# inline namespace (debian3) and the options.h choices. The script checks, before building, that
# the source's headers are byte for byte the installed /usr/include/absl, so that code compiled
# against the system headers may run on these libraries. Only -fsanitize=thread is added.
#
# Idempotent: if build/tsan-absl/lib holds libabsl_synchronization.so.20220623 the build is
# skipped. Needs root once (a deb-src entry and apt-get update) and dpkg-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
prefix="$root/build/tsan-absl"
libdir="$prefix/lib"
if [[ -e "$libdir/libabsl_synchronization.so.20220623" ]]; then
  echo "$libdir"
  exit 0
fi

version="$(dpkg-query -W -f='${source:Version}' libabsl-dev)"
case "$version" in 20220623.*) ;; *)
  echo "tsan_abseil.sh: installed libabsl-dev is $version; this script knows 20220623" >&2
  exit 1 ;;
esac

# Debian's source package of exactly that version.
src_list=/etc/apt/sources.list.d/rnnserve-bookworm-src.sources
if ! apt-cache showsrc "abseil=$version" >/dev/null 2>&1; then
  cat >"$src_list" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -qq
fi
work="$prefix.build"
rm -rf "$work"
mkdir -p "$work"
(cd "$work" && apt-get source -qq "abseil=$version" >/dev/null)
srcdir="$(find "$work" -maxdepth 1 -type d -name 'abseil-*' | head -1)"

# The ABI check: every header the package installs is the one our code compiles against.
while IFS= read -r -d '' h; do
  rel="${h#"$srcdir"/}"
  if ! cmp -s "$h" "/usr/include/$rel"; then
    echo "tsan_abseil.sh: $rel differs from /usr/include/$rel (not the installed abseil)" >&2
    exit 1
  fi
done < <(find "$srcdir/absl" \( -name '*.h' -o -name '*.inc' \) -print0)
grep -q '^#define ABSL_OPTION_INLINE_NAMESPACE_NAME debian3' "$srcdir/absl/base/options.h"

# debian/rules: export DEB_BUILD_MAINT_OPTIONS = hardening=+bindnow reproducible=+fixfilepath
eval "$(cd "$srcdir" && DEB_BUILD_MAINT_OPTIONS='hardening=+bindnow reproducible=+fixfilepath' \
  dpkg-buildflags --export=sh)"
tsan="-fsanitize=thread -fno-omit-frame-pointer"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
CC=gcc CXX=g++ cmake -S "$srcdir" -B "$work/shared" -G Ninja "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_FLAGS="$CFLAGS $CPPFLAGS $tsan" \
  -DCMAKE_CXX_FLAGS="$CXXFLAGS $CPPFLAGS $tsan" \
  -DCMAKE_SHARED_LINKER_FLAGS="$LDFLAGS -fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="$LDFLAGS -fsanitize=thread" \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF >/dev/null
# The build's progress goes to stderr: stdout is the library path alone (run_sanitizers.sh).
nice -n 10 cmake --build "$work/shared" -j"${RNNSERVE_BUILD_JOBS:-$(nproc)}" >&2
cmake --install "$work/shared" >/dev/null

# Same SONAMEs as the installed libraries, one for one.
for sys in /usr/lib/x86_64-linux-gnu/libabsl_*.so.20220623; do
  base="$(basename "$sys")"
  if [[ ! -e "$libdir/$base" ]]; then
    echo "tsan_abseil.sh: $base is installed but was not built" >&2
    rm -rf "$libdir"
    exit 1
  fi
  # Every strong symbol the installed library exports is exported here too (only weak template
  # instantiations, which each user carries itself, may differ with the inlining TSan changes).
  missing="$(comm -23 \
    <(nm -D --defined-only "$sys" | awk '$2 != "W" && $2 != "V" {print $3}' | sort -u) \
    <(nm -D --defined-only "$libdir/$base" | awk '{print $3}' | sort -u))"
  if [[ -n "$missing" ]]; then
    echo "tsan_abseil.sh: $base lacks symbols the installed one exports:" >&2
    echo "$missing" >&2
    rm -rf "$libdir"
    exit 1
  fi
done
rm -rf "$work"
echo "$libdir"
