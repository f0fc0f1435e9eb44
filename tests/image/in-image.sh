#!/bin/sh
# Run inside the runtime image as root by tests/image/run.sh: what its binaries load and what is
# installed, as sections that tests/image/packages.py reads.
#   == loaded      the package of every shared library ldd resolves for /usr/local/bin/*
#   == not-found   libraries ldd could not find
#   == installed   every installed package, its Depends and Pre-Depends
#   == manual      packages installed by name (apt-mark showmanual), not as a dependency
#   == tools       compilers, assemblers and linkers found on PATH
set -eu

# The package owning a library. dpkg records the path a package ships (/lib/... or /usr/lib/...)
# while ldd may report the other one (merged /usr) or a symbolic link's name.
owner() {
  for p in "$1" "$(readlink -f "$1")"; do
    for q in "$p" "${p#/usr}" "/usr$p"; do
      o=$(dpkg -S "$q" 2>/dev/null | sed -n '1s/:.*//p')
      if [ -n "$o" ]; then echo "$o"; return; fi
    done
  done
  echo "?$1"
}

libs=$(for b in /usr/local/bin/*; do ldd "$b"; done)
echo "== loaded"
echo "$libs" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
  while read -r lib; do owner "$lib"; done | sort -u
echo "== not-found"
echo "$libs" | awk '/not found/ { print $1 }' | sort -u
echo "== installed"
dpkg-query -W -f '${Package}\t${Depends}, ${Pre-Depends}\n'
echo "== manual"
apt-mark showmanual
echo "== tools"
for t in cc c++ gcc g++ cpp clang clang++ as ld ld.bfd ld.gold make cmake ninja; do
  command -v "$t" || true
done
