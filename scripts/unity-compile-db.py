#!/usr/bin/env python3
"""A compile database with one entry per source, from one whose libraries build in unity batches.

  scripts/unity-compile-db.py BUILD_DIR OUT_DIR    writes OUT_DIR/compile_commands.json

CMake lists a unity-built library's batches (CMakeFiles/<target>.dir/Unity/unity_N_cxx.cxx) in
compile_commands.json, not its sources, so clang-tidy would find no command for them
(scripts/check.sh tidy). Each source a batch includes gets the batch's command with the batch
replaced by the source, which is how that source compiles on its own (the release preset builds
without batches), less -Wno-subobject-linkage: it is there for the batch alone (CMakeLists.txt),
and clang, which does not know it, would report an unknown warning option. Entries of sources
built on their own are kept as they are.
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^#include "(.+)"$')
BATCH_ONLY = "-Wno-subobject-linkage"


def sources_of(batch):
    with open(batch, encoding="utf-8") as f:
        return [m.group(1) for m in map(INCLUDE.match, f.read().splitlines()) if m]


def expand(entry):
    batch = entry["file"]
    if "/Unity/unity_" not in batch:
        return [entry]
    out = []
    for source in sources_of(batch):
        e = dict(entry)
        e["file"] = source
        if "command" in e:
            e["command"] = e["command"].replace(batch, source).replace(f" {BATCH_ONLY}", "")
        if "arguments" in e:
            e["arguments"] = [source if a == batch else a for a in e["arguments"]
                              if a != BATCH_ONLY]
        out.append(e)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().split("\n")[2])
    build, out_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    expanded = [e for entry in entries for e in expand(entry)]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compile_commands.json"), "w", encoding="utf-8") as f:
        json.dump(expanded, f, indent=1)


if __name__ == "__main__":
    main()
