#!/usr/bin/env bash
# install.sh — `make install` as a packager runs it, into a temporary DESTDIR, then used:
#   - the files are there: lean.h, liblean.a, liblean.so.VERSION (its SONAME liblean.so.MAJOR),
#     the two links, lean.pc, the lean command (which prints the version)
#   - a small C program compiled and linked with `pkg-config --cflags --libs lean` alone
#     (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR into DESTDIR) needs liblean.so.MAJOR, runs,
#     and sees the header's version and the library's failure contract
#   - `make uninstall` removes every file it installed
# Prints "test_install: N passed, N failed" (tests/run.sh's native stage runs it).
# Usage: bash tests/install.sh [BUILD]   (default build; the Makefile's BUILD directory)
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MAKE=${MAKE:-make}
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
prefix=/usr/local

passed=0
failed=0
check() { # check DESCRIPTION COMMAND...: the command's success is one passed test
    local what=$1; shift
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "install.sh: FAIL: $what"
    fi
}

version=$(sed -n 's/^#define LEAN_VERSION "\(.*\)"$/\1/p' include/lean.h)
major=${version%%.*}

check "make install" "$MAKE" -s --no-print-directory BUILD="$BUILD" DESTDIR="$root" PREFIX="$prefix" install
lib=$root$prefix/lib
for f in include/lean.h lib/liblean.a "lib/liblean.so.$version" lib/pkgconfig/lean.pc bin/lean; do
    check "$f installed" test -f "$root$prefix/$f"
done
check "liblean.so.$major -> liblean.so.$version" test "$(readlink "$lib/liblean.so.$major")" = "liblean.so.$version"
check "liblean.so -> liblean.so.$major" test "$(readlink "$lib/liblean.so")" = "liblean.so.$major"
check "SONAME liblean.so.$major" grep -q "SONAME *liblean.so.$major\$" <(objdump -p "$lib/liblean.so.$version")
check "lean --version" test "$("$root$prefix/bin/lean" --version)" = "lean $version"

export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
check "pkg-config --modversion" test "$(pkg-config --modversion lean)" = "$version"
cat >"$tmp/use_lean.c" <<'EOF'
#include <lean.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    lean_error err;
    lean_model *m = NULL;
    lean_status st = lean_model_load_file("/nonexistent/model.gguf", &m, &err);
    if (strcmp(lean_version(), LEAN_VERSION) != 0 || st != LEAN_ERR_IO || m || err.status != LEAN_ERR_IO) return 1;
    printf("%s %s\n", lean_version(), lean_status_str(st));
    return 0;
}
EOF
# shellcheck disable=SC2046 # pkg-config's words are flags
check "compile against the installed lean" \
    "$CC" -std=c11 -Wall -Wextra -Werror -o "$tmp/use_lean" "$tmp/use_lean.c" $(pkg-config --cflags --libs lean)
check "linked against liblean.so.$major" grep -q "NEEDED *liblean.so.$major\$" <(objdump -p "$tmp/use_lean")
check "run it" test "$(LD_LIBRARY_PATH=$lib "$tmp/use_lean")" = "$version i/o error"

check "make uninstall" "$MAKE" -s --no-print-directory BUILD="$BUILD" DESTDIR="$root" PREFIX="$prefix" uninstall
check "nothing left" test -z "$(find "$root" ! -type d)"

echo "test_install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
