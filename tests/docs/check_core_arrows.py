#!/usr/bin/env python3
"""core/README.md#arrows against what the build links (docs/style.md#rooms-with-doors).

Fails, naming what differs, when
  (a) the table between the core-arrows markers in core/README.md and the neuron_core_room()
      calls of core/CMakeLists.txt disagree: a room missing on either side, or different PUBLIC
      or PRIVATE links;
  (b) an arrow does not point down: the drawing above the table puts every room on one row, and
      every link must go to a room on a lower row (so there is no cycle either);
  (c) a room's sources include a header of another room that its links do not reach (its own
      links, and the PUBLIC links of those, transitively): the build would only find it by
      accident of include paths.

Usage: check_core_arrows.py [--root DIR] | --self-test        Standard library only.
"""
import os
import re
import sys
import tempfile

import check_citations

ROOM_CALL = re.compile(r'^\s*neuron_core_room\((\w+)(.*?)\)', re.S | re.M)
KEYWORDS = ('SOURCES', 'PUBLIC_DEPS', 'PRIVATE_DEPS')
TABLE = re.compile(r'<!-- core-arrows:.*?-->\n(.*?)<!-- /core-arrows -->', re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s+"core/(\w+)/', re.M)


def rooms_from_cmake(text):
    """room -> {'PUBLIC_DEPS': set, 'PRIVATE_DEPS': set} of other rooms, as CMake links them."""
    calls = {m.group(1): m.group(2) for m in ROOM_CALL.finditer(text)}
    out = {}
    for room, args in calls.items():
        deps, section = {'PUBLIC_DEPS': set(), 'PRIVATE_DEPS': set()}, None
        for token in re.sub(r'#[^\n]*', '', args).split():
            if token in KEYWORDS:
                section = token
            elif section in deps:
                m = re.fullmatch(r'neuron::(\w+)', token)
                if m and m.group(1) in calls:
                    deps[section].add(m.group(1))
        out[room] = deps
    return out


def rooms_from_readme(text):
    """(room -> links as the table says, [rows of the drawing: set of rooms]) or an error."""
    m = TABLE.search(text)
    if not m:
        return None, None, 'core/README.md has no table between <!-- core-arrows --> markers'
    table = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) != 3 or cells[0] in ('Room', '') or set(cells[0]) <= {'-'}:
            continue
        split = lambda c: {r.strip() for r in c.split(',') if r.strip()}
        table[cells[0]] = {'PUBLIC_DEPS': split(cells[1]), 'PRIVATE_DEPS': split(cells[2])}
    head = text[text.index('<a id="arrows"></a>'):m.start()] if '<a id="arrows"></a>' in text \
        else text[:m.start()]
    fence = re.search(r'```\n(.*?)```', head, re.S)
    rows = []
    for line in (fence.group(1).splitlines() if fence else []):
        names = {w for w in re.findall(r'[a-z]+', line) if w in table}
        if names:
            rows.append(names)
    return table, rows, None


def reach(room, rooms):
    """Rooms whose headers `room`'s sources may include: its links and their PUBLIC closure."""
    seen, todo = set(), list(rooms[room]['PUBLIC_DEPS'] | rooms[room]['PRIVATE_DEPS'])
    while todo:
        r = todo.pop()
        if r not in seen and r in rooms:
            seen.add(r)
            todo += rooms[r]['PUBLIC_DEPS']
    return seen


def check(root):
    problems = []
    with open(os.path.join(root, 'core/CMakeLists.txt'), encoding='utf-8') as fh:
        built = rooms_from_cmake(fh.read())
    with open(os.path.join(root, 'core/README.md'), encoding='utf-8') as fh:
        table, rows, error = rooms_from_readme(fh.read())
    if error:
        return [error]
    for room in sorted(set(built) | set(table)):
        if room not in table:
            problems.append(f'core/CMakeLists.txt declares room "{room}"; core/README.md#arrows '
                            f'has no row for it')
        elif room not in built:
            problems.append(f'core/README.md#arrows lists "{room}", which core/CMakeLists.txt '
                            f'does not declare')
        else:
            for kind in ('PUBLIC_DEPS', 'PRIVATE_DEPS'):
                if built[room][kind] != table[room][kind]:
                    problems.append(f'{room}: core/CMakeLists.txt {kind} {sorted(built[room][kind])}, '
                                    f'core/README.md#arrows says {sorted(table[room][kind])}')
    row_of = {}
    for i, names in enumerate(rows):
        for r in names:
            if r in row_of:
                problems.append(f'the drawing shows "{r}" twice')
            row_of[r] = i
    for room, deps in sorted(built.items()):
        if room not in row_of:
            problems.append(f'the drawing in core/README.md#arrows has no "{room}"')
            continue
        for d in sorted(deps['PUBLIC_DEPS'] | deps['PRIVATE_DEPS']):
            if d in row_of and row_of[d] <= row_of[room]:
                problems.append(f'{room} -> {d}: the arrow does not point down in the drawing')
        problems += includes_beyond_reach(root, room, built)
    return problems


def includes_beyond_reach(root, room, rooms):
    allowed, out = reach(room, rooms) | {room}, []
    base = os.path.join(root, 'core', room)
    for dirpath, _, filenames in os.walk(base):
        for f in sorted(filenames):
            if not f.endswith(('.h', '.cc')):
                continue
            path = os.path.join(dirpath, f)
            with open(path, encoding='utf-8', errors='replace') as fh:
                for other in sorted(set(INCLUDE.findall(fh.read())) - allowed):
                    if other in rooms:
                        out.append(f'{os.path.relpath(path, root)} includes core/{other}/, which '
                                   f'{room} does not link')
    return out


def self_test():
    cmake = ('neuron_core_room(low SOURCES low/a.cc)\n'
             'neuron_core_room(mid SOURCES mid/b.cc PUBLIC_DEPS neuron::low absl::strings)\n'
             'neuron_core_room(top SOURCES top/c.cc PRIVATE_DEPS neuron::mid)\n'
             'neuron_core_room(side SOURCES side/d.cc PUBLIC_DEPS neuron::mid)\n'
             'neuron_core_room(extra SOURCES extra/e.cc)\n')
    readme = ('<a id="arrows"></a>\n```\n  top\n  mid side\n  low\n```\n'
              '<!-- core-arrows: x -->\n| Room | Links (PUBLIC) | Links (PRIVATE) |\n|---|---|---|\n'
              '| low | | |\n| mid | low | |\n| top | | mid |\n| side | mid, low | |\n| gone | | |\n'
              '<!-- /core-arrows -->\n')
    sources = {'core/low/a.cc': '#include "core/mid/b.h"\n',        # up: not linked
               'core/mid/b.cc': '#include "core/low/a.h"\n',
               'core/top/c.cc': '#include "core/low/a.h"\n',        # through mid's PUBLIC link
               'core/side/d.cc': '#include "core/top/c.h"\n'}       # sideways: not linked
    expected = ['lists "gone"', 'declares room "extra"', 'drawing in core/README.md#arrows has no "extra"',
                "side: core/CMakeLists.txt PUBLIC_DEPS ['mid'], core/README.md#arrows says ['low', 'mid']",
                'side -> mid: the arrow does not point down',
                'core/low/a.cc includes core/mid/', 'core/side/d.cc includes core/top/']
    with tempfile.TemporaryDirectory() as tmp:
        check_citations.write_tree(
            tmp, dict(sources, **{'core/CMakeLists.txt': cmake, 'core/README.md': readme}))
        problems = check(tmp)
    return check_citations.judge_self_test(problems, expected)


def main():
    args = check_citations.arg_parser(__doc__).parse_args()
    if args.self_test:
        return self_test()
    problems = check(args.root)
    for p in problems:
        print(p)
    print(f'{len(problems)} problem(s) with core/README.md#arrows' if problems else
          'core/README.md#arrows: the table is what core/CMakeLists.txt links, every arrow points '
          'down, every include is reached')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
