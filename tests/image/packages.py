#!/usr/bin/env python3
"""Checks what the runtime image carries against what its binaries load (tests/image/run.sh).

    packages.py IN_IMAGE_OUTPUT BASE_PACKAGES

IN_IMAGE_OUTPUT: tests/image/in-image.sh's sections, from the runtime image. BASE_PACKAGES: the
packages of the runtime stage's base image, one a line. Passes when
  - every library the binaries need is found;
  - every package the image adds to its base is one the binaries load, or a dependency (Depends,
    Pre-Depends, recursively) of one they load: apt cannot install a package without those;
  - every package the Dockerfile installs by name is one the binaries load;
  - there is no compiler, assembler, linker or build tool on PATH, and no -dev package.
Prints the packages added, and which of them are loaded. Exit 1 on a failure.
"""
import re
import sys

BUILD_TOOLS = re.compile(
    r"^(gcc|g\+\+|cpp|clang|llvm|binutils|build-essential|make|cmake|ninja-build)(-[0-9.]+)?$"
)


def sections(path):
    out, name = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("== "):
                name = line[3:]
                out[name] = []
            elif name and line:
                out[name].append(line)
    return out


def depends(field):
    """Package names in a Depends field; every alternative of `a | b` (the installed one counts)."""
    names = set()
    for group in field.split(","):
        for alt in group.split("|"):
            alt = alt.strip()
            if alt:
                names.add(re.split(r"[\s(:]", alt, maxsplit=1)[0])
    return names


def closure(roots, deps):
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen or p not in deps:
            continue
        seen.add(p)
        todo.extend(deps[p] - seen)
    return seen


def main():
    s = sections(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        base = {line.strip() for line in f if line.strip()}
    deps = {}
    for line in s.get("installed", []):
        name, _, field = line.partition("\t")
        deps[name] = depends(field)
    installed = set(deps)
    loaded = set(s.get("loaded", []))
    failures = []
    if s.get("not-found"):
        failures.append("libraries not found: " + " ".join(s["not-found"]))
    unowned = sorted(p for p in loaded if p.startswith("?"))
    if unowned:
        failures.append("loaded libraries no package owns: " + " ".join(unowned))
    added = installed - base
    needed = closure(loaded, deps)
    extra = sorted(added - needed)
    if extra:
        failures.append("packages the binaries do not load: " + " ".join(extra))
    by_name = sorted(set(s.get("manual", [])) - base - loaded)
    if by_name:
        failures.append("installed by name but not loaded: " + " ".join(by_name))
    tools = sorted(p for p in installed if BUILD_TOOLS.match(p) or p.endswith("-dev"))
    if tools:
        failures.append("build packages: " + " ".join(tools))
    if s.get("tools"):
        failures.append("build tools on PATH: " + " ".join(s["tools"]))

    print(f"runtime image: {len(installed)} packages, {len(base)} from its base, "
          f"{len(added)} added: {len(added & loaded)} loaded by the binaries, "
          f"{len((added & needed) - loaded)} their dependencies")
    print("  loaded:       " + " ".join(sorted(added & loaded)))
    print("  dependencies: " + " ".join(sorted((added & needed) - loaded)))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
