#!/usr/bin/env python3
"""Where a build's time went, from the build directory's .ninja_log (docs/build.md#build-cost).

  scripts/build-cost.py [BUILD_DIR] [--slowest N]    (`make build-cost`; BUILD_DIR: build/dev)

Ninja appends one line per output of every step it runs: `start end mtime output hash`, times in
ms since that build began. A step with several outputs (protoc's four files, a link with its
byproducts) has one line per output with the same start, end and command hash, so it is counted
once here. A step run again by a later build supersedes the earlier line for the same output, and
a line whose output the build graph no longer has (ninja -t targets all) is left out.

Prints the step time summed over unique steps (the figure the build-cost table tracks: it does
not depend on -j), the wall time of the newest build, step time per room (the source folder a
step's output belongs to) split into compiling, linking and the rest, and the slowest steps.
"""
import argparse
import os
import subprocess
import sys

# Rooms by what the demo needs (`make demo` builds the agent and the simulator, `make test` the
# rest): the top folder of a room says which group it is in.
GROUPS = (("agent", ("core", "http", "proto", "plugin", "monitor", "top")),
          ("simulator", ("driver-sim",)),
          ("tests", ("tests",)),
          ("bench", ("bench",)))


def read_log(path, build_dir):
    """The newest line per output, as (start, end, output, hash); outputs relative to build_dir."""
    prefix = os.path.abspath(build_dir) + os.sep
    latest = {}
    with open(path, encoding="utf-8") as f:
        header = f.readline()
        if not header.startswith("# ninja log v"):
            sys.exit(f"build-cost: {path} is not a ninja log (first line {header.strip()!r})")
        for n, line in enumerate(f, start=2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 5:
                sys.exit(f"build-cost: {path}:{n}: expected 5 tab-separated fields")
            start, end, _mtime, output, digest = fields
            if output.startswith(prefix):
                output = output[len(prefix):]
            latest[output] = (int(start), int(end), output, digest)
    return latest.values()


def current_outputs(build_dir):
    """What the build graph makes now (`ninja -t targets all`), or None without ninja. A log keeps
    the lines of outputs a reconfigured build no longer has (a renamed target, a source that went
    into a unity batch): they are not part of what this build costs."""
    try:
        listing = subprocess.run(["ninja", "-C", build_dir, "-t", "targets", "all"], check=True,
                                 capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    prefix = os.path.abspath(build_dir) + os.sep
    return {line.rsplit(": ", 1)[0].removeprefix(prefix) for line in listing.splitlines()}


def unique_steps(entries):
    """One record per step: (seconds, [outputs])."""
    steps = {}
    for start, end, output, digest in entries:
        steps.setdefault((start, end, digest), []).append(output)
    return [((end - start) / 1000.0, sorted(outputs))
            for (start, end, _), outputs in steps.items()]


def room_of(output):
    """The source folder a build output belongs to: its path up to CMakeFiles/, else its folder."""
    if "/CMakeFiles/" in output:
        return output.split("/CMakeFiles/")[0]
    if output.startswith("CMakeFiles/"):
        return "."
    if "/gen/" in output:
        return output.split("/gen/")[0]
    return os.path.dirname(output) or "."


def kind_of(outputs):
    first = outputs[0]
    if first.endswith((".o", ".gch")):
        return "compile"
    if any(o.endswith((".pb.cc", ".pb.h")) for o in outputs):
        return "generate"
    if "CMakeFiles/" in first:  # a custom command's stamp (the build info, a PCH's copy)
        return "other"
    if first.endswith((".a", ".so")) or ".so." in first or os.path.basename(first).find(".") < 0:
        return "link"
    return "other"


def group_of(room):
    top = room.split("/")[0]
    for name, tops in GROUPS:
        if top in tops:
            return name
    return "other"


def source_of(output):
    """The source a compile step compiled: build path less CMakeFiles/<target>.dir/ and .o; a
    unity batch is named by its target (`tests/core: core_tests batch 0`)."""
    if "/CMakeFiles/" in output and ".dir/" in output:
        head, tail = output.split("/CMakeFiles/", 1)
        target, tail = tail.split(".dir/", 1)
        if tail.startswith("Unity/unity_"):
            batch = tail[len("Unity/unity_"):].split("_")[0]
            return f"{head}: {target} batch {batch}"
        path = f"{head}/{tail}" if head else tail
        return path[:-2] if path.endswith(".o") else path
    return output


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir", nargs="?", default="build/dev")
    parser.add_argument("--slowest", type=int, default=20, help="how many slowest steps to list")
    args = parser.parse_args()
    log = os.path.join(args.build_dir, ".ninja_log")
    if not os.path.exists(log):
        sys.exit(f"build-cost: {log} does not exist: build {args.build_dir} first")
    entries = list(read_log(log, args.build_dir))
    outputs = current_outputs(args.build_dir)
    if outputs is not None:
        entries = [e for e in entries if e[2] in outputs]
    if not entries:
        sys.exit(f"build-cost: {log} has no steps")
    steps = unique_steps(entries)
    total = sum(s for s, _ in steps)
    wall = (max(e for _, e, _, _ in entries) - min(s for s, _, _, _ in entries)) / 1000.0

    rooms = {}
    for seconds, outputs in steps:
        room = room_of(outputs[0])
        row = rooms.setdefault(room, {"compile": 0.0, "link": 0.0, "generate": 0.0, "other": 0.0,
                                      "steps": 0, "objects": 0, "executables": 0})
        kind = kind_of(outputs)
        row[kind] += seconds
        row["steps"] += 1
        row["objects"] += kind == "compile"
        row["executables"] += kind == "link" and not outputs[0].endswith((".a", ".so"))

    print(f"{args.build_dir}: {len(steps)} steps, {total:,.0f} s of step time "
          f"(summed over unique steps), {wall:,.0f} s wall for the newest build")
    groups = {}
    for room, row in rooms.items():
        g = groups.setdefault(group_of(room), [0.0, 0])
        g[0] += sum(row[k] for k in ("compile", "link", "generate", "other"))
        g[1] += row["steps"]
    print()
    print(f"{'group':<12}{'step s':>9}{'share':>7}{'steps':>7}")
    for name, (seconds, count) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:<12}{seconds:>9,.0f}{seconds / total:>7.0%}{count:>7}")
    print()
    print(f"{'room':<28}{'step s':>9}{'compile':>9}{'link':>8}{'other':>7}{'objects':>9}"
          f"{'exes':>6}")
    for room, row in sorted(rooms.items(), key=lambda kv: -sum(
            kv[1][k] for k in ("compile", "link", "generate", "other"))):
        whole = sum(row[k] for k in ("compile", "link", "generate", "other"))
        print(f"{room:<28}{whole:>9,.0f}{row['compile']:>9,.0f}{row['link']:>8,.0f}"
              f"{row['generate'] + row['other']:>7,.0f}{row['objects']:>9}{row['executables']:>6}")
    print()
    print(f"the {args.slowest} slowest steps:")
    for seconds, outputs in sorted(steps, key=lambda s: -s[0])[:args.slowest]:
        print(f"{seconds:>7.1f} s  {source_of(outputs[0])}")


if __name__ == "__main__":
    main()
