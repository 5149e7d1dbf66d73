#!/usr/bin/env bash
# Builds the portable bundle in build-bundle/: evo and evo_tests with static libstdc++/libgcc and
# static SQLite, needing only glibc and NVRTC (from /usr/local/cuda/lib64) on the target machine.
# Carry build-bundle/ to the GPU machine and run build-bundle/evo there.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build-bundle -DCMAKE_BUILD_TYPE=Release -DEVO_PORTABLE=ON -DEVO_BUILD_TESTS=ON >/dev/null
cmake --build build-bundle -j"$(nproc)"

# Refuse a bundle that would need a library the GPU machine does not have.
allowed='linux-vdso|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux|libnvrtc\.so'
for binary in build-bundle/evo build-bundle/evo_tests; do
  if extra=$(ldd "$binary" | grep -v -E "$allowed"); then
    echo "build-bundle: $binary needs libraries the GPU machine lacks:" >&2
    echo "$extra" >&2
    exit 1
  fi
done
strip --strip-debug build-bundle/evo build-bundle/evo_tests
du -sh build-bundle/evo build-bundle/evo_tests
