#!/usr/bin/env bash
# Gathers here (a Debian machine with the project's packages) what a bare GPU host lacks to build
# the runner, into .gpu-deps/ at the repository root (ignored by git):
#   include/sqlite3.h, lib/libsqlite3.so(.0)        SQLite (libsqlite3-dev), needs only libc/libm
#   include/nlohmann/, share/cmake/nlohmann_json/   nlohmann/json's headers and CMake package
# The device tool takes the folder along with carry=[".gpu-deps"], and bench/gpu-check.sh passes
# it to CMake as a prefix. About 2.5 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu-deps
rm -rf "$dest"
mkdir -p "$dest/include" "$dest/lib" "$dest/share/cmake"

header=/usr/include/sqlite3.h
library=$(readlink -f /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 2> /dev/null || true)
json=/usr/include/nlohmann
json_cmake=/usr/share/cmake/nlohmann_json
for need in "$header" "$library" "$json/json.hpp" "$json_cmake/nlohmann_jsonConfig.cmake"; do
    if [ -z "$need" ] || [ ! -e "$need" ]; then
        echo "gpu-deps: ${need:-libsqlite3.so.0} is missing here: install libsqlite3-dev and nlohmann-json3-dev (./.ci/setup-deps)" >&2
        exit 1
    fi
done
cp "$header" "$dest/include/"
cp "$library" "$dest/lib/libsqlite3.so.0"
ln -s libsqlite3.so.0 "$dest/lib/libsqlite3.so"
cp -r "$json" "$dest/include/"
cp -r "$json_cmake" "$dest/share/cmake/"
echo "gpu-deps: $(du -sh "$dest" | cut -f1) in $dest: SQLite $(grep -m1 '#define SQLITE_VERSION ' "$header" | tr -dc '0-9.'), nlohmann/json $(grep -m1 'set(PACKAGE_VERSION ' "$json_cmake/nlohmann_jsonConfigVersion.cmake" | tr -dc '0-9.')"
echo "gpu-deps: carry it with the device tool: carry=[\"$dest\"]"
