#!/usr/bin/env python3
"""The newcomer's map against the tree (docs/architecture.md#layout, each room's README).

Fails, naming file and line, when
  (a) docs/architecture.md#layout's drawing misses a top-level folder of the tree, or names one
      that is not there;
  (b) its core/ entry names rooms (the words before a parenthesis) other than core's folders, or
      its driver-sim/ entry names folders (`word/`) other than driver-sim's rooms, the folders
      with a CMakeLists.txt;
  (c) a README's "## File map" names a file its folder does not have, or its folder has a source
      file (.h, .c, .cc, .proto, .map; in subfolders without a README of their own too) that no
      row names, or that two rows name. A row names files in backticks in its first column: `a.{h,cc}` is a.h and a.cc,
      `preload_*.c` every match, and `include/nrt/nrt.h`, `nrt_status.h` the second beside the
      first.

Usage: check_rooms.py [--root DIR] | --self-test        Standard library only.
"""
import fnmatch
import os
import re
import sys
import tempfile

import check_citations

LAYOUT = 'docs/architecture.md'
SOURCE_EXT = ('.h', '.c', '.cc', '.proto', '.map')
ENTRY = re.compile(r'^([\w.\-]+)/\s', re.M)


def layout_block(text):
    """The drawing under <a id="layout">: its first fenced block, with the line it starts on."""
    at = text.find('<a id="layout"></a>')
    if at < 0:
        return None, 0
    start = text.index('```', at) + 3
    start = text.index('\n', start) + 1
    end = text.index('```', start)
    return text[start:end], text[:start].count('\n') + 1


def entries(block):
    """Top-level folder -> the text of its entry (its line and the indented ones after it)."""
    out, name = {}, None
    for line in block.split('\n'):
        m = ENTRY.match(line + ' ')
        if m:
            name = m.group(1)
            out[name] = line[len(name) + 1:]
        elif name is not None and line.startswith(' '):
            out[name] += '\n' + line
        else:
            name = None
    return out


def rooms_listed(text):
    """The words directly before a '(' at depth 0 after the entry's first ':' at depth 0: core's
    rooms in `... in rooms (core/README.md): base (file_io, ...), driver (...)`."""
    depth, listing, words = 0, False, []
    for m in re.finditer(r'(\w+)?\s*\(|\)|:', text):
        if m.group(0) == ')':
            depth = max(depth - 1, 0)
        elif m.group(0) == ':':
            listing = listing or depth == 0
        else:
            if depth == 0 and listing and m.group(1):
                words.append(m.group(1))
            depth += 1
    return words


def check_layout(root, files, report):
    text = check_citations.read_text(os.path.join(root, LAYOUT))
    if text is None:
        return
    block, line = layout_block(text)
    if block is None:
        report(f'{LAYOUT}:1: no <a id="layout"></a> drawing')
        return
    where = f'{LAYOUT}:{line}'
    tops = {f.split('/')[0] for f in files if '/' in f and not f.startswith('.')}
    drawn = entries(block)
    named = set(drawn) | set(re.findall(r'(?<![\w/])([\w\-]+)/(?=\s|$)', block.split('\n')[0]))
    for missing in sorted(tops - named):
        report(f'{where}: the layout does not show {missing}/')
    for extra in sorted(set(drawn) - tops):
        report(f'{where}: the layout shows {extra}/, which the tree does not have')
    if 'core' in drawn:
        rooms = {f.split('/')[1] for f in files
                 if f.startswith('core/') and f.count('/') >= 2 and f.endswith('.h')}
        compare(where, 'core', rooms, set(rooms_listed(drawn['core'])), report)
    if 'driver-sim' in drawn:
        rooms = {f.split('/')[1] for f in files
                 if f.startswith('driver-sim/') and f.count('/') == 2
                 and f.endswith('/CMakeLists.txt')}
        shown = set(re.findall(r'(?<![\w/.\-])([a-z][\w\-]*)/(?![\w])', drawn['driver-sim']))
        compare(where, 'driver-sim', rooms, shown, report)


def compare(where, folder, rooms, shown, report):
    for r in sorted(rooms - shown):
        report(f'{where}: the layout does not name {folder}/{r}')
    for r in sorted(shown - rooms):
        report(f'{where}: the layout names {folder}/{r}, which is not one of its rooms')


def expand(token):
    """`a.{h,cc}` -> [a.h, a.cc]."""
    m = re.search(r'\{([^}]*)\}', token)
    if not m:
        return [token]
    return [x for alt in m.group(1).split(',')
            for x in expand(token[:m.start()] + alt + token[m.end():])]


def file_map(text):
    """(line number, [names]) of each row under "## File map", names relative to the folder."""
    rows, inside = [], False
    for n, line in enumerate(text.split('\n'), start=1):
        if line.startswith('## '):
            inside = line.strip().lower() == '## file map'
            continue
        if not inside or not line.startswith('| `'):
            continue
        first = line.split('|')[1]
        names, folder = [], ''
        for token in re.findall(r'`([^`]+)`', first):
            if '/' in token:
                folder = token.rsplit('/', 1)[0] + '/'
                names += expand(token)
            else:
                names += expand(folder + token)
        rows.append((n, names))
    return rows


def check_file_maps(root, files, report):
    readmes = [f for f in files if f.endswith('/README.md')]
    homes = {os.path.dirname(f) for f in readmes}
    for readme in readmes:
        text = check_citations.read_text(os.path.join(root, readme))
        rows = file_map(text or '')
        if not rows:
            continue
        home = os.path.dirname(readme)
        own = [f[len(home) + 1:] for f in files
               if f.startswith(home + '/') and f.endswith(SOURCE_EXT)
               and owner(os.path.dirname(f), homes) == home]
        covered = {}
        for n, names in rows:
            for name in names:
                hits = fnmatch.filter(own, name)
                if not hits and not os.path.exists(os.path.join(root, home, name)):
                    report(f'{readme}:{n}: the file map names {name}, which {home}/ does not have')
                for hit in hits:
                    if covered.setdefault(hit, n) != n:
                        report(f'{readme}:{n}: the file map names {hit} again (line '
                               f'{covered[hit]})')
        for f in sorted(set(own) - set(covered)):
            report(f'{readme}:1: the file map does not name {f}')


def owner(folder, homes):
    """The nearest folder at or above `folder` with a README.md."""
    while folder and folder not in homes:
        folder = os.path.dirname(folder)
    return folder


def run(root):
    files = check_citations.list_files(root)
    problems = []
    check_layout(root, files, problems.append)
    check_file_maps(root, files, problems.append)
    return problems


def self_test():
    """A small tree with one of each mistake; each must be reported, and nothing else."""
    layout = ('# A\n\n<a id="layout"></a>\n## Layout\n\n```\nREADME.md  scripts/\n'
              'core/   in rooms (see): base (x, y), node (z)\ndriver-sim/  driver/ (a), gone/ (b)\n'
              'docs/   this\n```\n')
    tree = {
        LAYOUT: layout,
        'scripts/s.sh': '', 'core/base/a.h': '', 'core/proc/p.h': '', 'core/node/n.h': '',
        'driver-sim/driver/CMakeLists.txt': '', 'driver-sim/kubelet/CMakeLists.txt': '',
        'bench/b.cc': '',
        'driver-sim/driver/README.md': ('# d\n\n## File map\n\n| File | What |\n|---|---|\n'
                                        '| `a.{h,cc}` | a |\n| `inc/x.h`, `y.h` | x |\n'
                                        '| `missing.cc` | m |\n| `p_*.c` | p |\n'
                                        '| `a.h` | again |\n'),
        'driver-sim/driver/a.h': '', 'driver-sim/driver/a.cc': '', 'driver-sim/driver/inc/x.h': '',
        'driver-sim/driver/inc/y.h': '', 'driver-sim/driver/p_one.c': '',
        'driver-sim/driver/unmapped.cc': '',
    }
    expected = ['does not show bench/', 'does not name core/proc', 'does not name '
                'driver-sim/kubelet', 'names driver-sim/gone', 'names missing.cc',
                'does not name unmapped.cc', 'names a.h again']
    with tempfile.TemporaryDirectory() as tmp:
        check_citations.write_tree(tmp, tree)
        problems = run(tmp)
    return check_citations.judge_self_test(problems, expected)


def main():
    args = check_citations.arg_parser(__doc__).parse_args()
    if args.self_test:
        return self_test()
    problems = run(args.root)
    for p in problems:
        print(p)
    print(f'{len(problems)} room map problem(s)' if problems else
          'rooms: the layout and every file map match the tree')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
