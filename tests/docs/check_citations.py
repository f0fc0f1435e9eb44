#!/usr/bin/env python3
"""Citations that a clone can follow (docs/style.md#cite-what-a-clone-can-read).

Walks the repository's files and fails, naming file:line, when
  (a) a citation names a Markdown file that does not exist, or an anchor that the file does not
      define: `docs/architecture.md#health`, `driver-sim/README.md#deviations`, a Markdown link
      `[text](runtime.md#status-codes)`, or `#anchor` continuing a citation on the same or the
      next lines (`docs/hardware.md#roofline, #peak-compute`). An anchor is defined by an
      explicit `<a id="..."></a>` or by a heading's GitHub slug;
  (b) a legacy citation remains: a document that lives outside the repository (DESIGN.md,
      "DRIVER-INTERFACE §2", STYLE 7, BUILD-NOTES, ...), "decision N", "issue N" (a tracker
      outside the repository), a bare "§N" that names no document, or a deviation label such as
      "(deviation D4)" that does not say where deviations are listed.

and (c) with --binary NAME=PATH, when a Markdown file shows NAME with a long flag that `PATH --help`
does not list: a command-line contract the binary no longer has (tests/docs/contracts.py).

Usage: check_citations.py [--root DIR] [--binary NAME=PATH ...]
                                           check the tree at DIR (default: this checkout)
       check_citations.py --self-test      check that the checks above catch what they should
Standard library only.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import contracts

SELF = 'tests/docs/check_citations.py'
# Where the deviation labels (D1, D2, ...) are defined; they may be used bare there.
DEVIATION_HOMES = {'driver-sim/README.md', 'docs/driver-interface.md'}

# ---- (b) legacy forms -------------------------------------------------------------------------
# Names with a hyphen are never ordinary words: any occurrence is a citation of an outside file.
OUTSIDE_HYPHENATED = re.compile(r'\b(DRIVER-INTERFACE|DRIVER-ABI|KUBELET-API|TOOLS-UX|BUILD-NOTES)\b')
# Plain words (a METRICS variable, HARDWARE as an enum value) only in a citation's shape.
OUTSIDE_PLAIN = re.compile(
    r'\b(DESIGN|STYLE|METRICS|RUNTIME|HARDWARE)'
    r'(\.md\b|\s*§|\s+"[A-Za-z]|\s+decisions?\b|\s+rule\b|\s+\d+\b(?![.\d]*\s*(?:GB|MB|ms|s)\b))')
DESIGN_DANGLING = re.compile(r'\(DESIGN\b|\bDESIGN\s*$')
DECISION = re.compile(r'\b[Dd]ecisions?\s+\d+\b')
ISSUE = re.compile(r'\b[Ii]ssues?\s+#?\d+\b')
SECTION_SIGN = re.compile(r'§\s*\d')
MD_LINK = re.compile(r'\[[^\]]*\]\([^)]*\)')
DEVIATION = re.compile(r'\b[Dd]eviations?\s+D\d{1,2}\b|\(D\d{1,2}[),:;]|[,;]\s*D\d{1,2}\)')

# ---- (a) citations -----------------------------------------------------------------------------
PATH_CITE = re.compile(r'(?<![\w/.\-])((?:\.{1,2}/)*(?:[\w.\-]+/)*[\w.\-]+\.md)(?:#([\w\-]+))?')
LINK_TARGET = re.compile(r'\]\(([^)\s]+)\)')
BARE_ANCHOR = re.compile(r'(?:^|(?<=[\s(,;]))#([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w\-])')
CPP_DIRECTIVES = {'include', 'pragma', 'define', 'if', 'ifdef', 'ifndef', 'else', 'elif', 'endif',
                  'error', 'undef', 'warning', 'line'}
EXPLICIT_ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')


def github_slug(text):
    text = re.sub(r'<[^>]+>', '', text)            # inline HTML
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # links keep their text
    text = text.replace('`', '').strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


class Anchors:
    """Anchors each Markdown file defines, read once."""

    def __init__(self):
        self.cache = {}

    def of(self, path):
        if path not in self.cache:
            found, seen, fence = set(), {}, False
            with open(path, encoding='utf-8', errors='replace') as fh:
                for line in fh:
                    if line.lstrip().startswith('```'):
                        fence = not fence
                        continue
                    found.update(EXPLICIT_ANCHOR.findall(line))
                    m = HEADING.match(line)
                    if m and not fence:
                        slug = github_slug(m.group(2))
                        n = seen.get(slug, 0)
                        seen[slug] = n + 1
                        found.add(slug if n == 0 else f'{slug}-{n}')
            self.cache[path] = found
        return self.cache[path]


def list_files(root):
    if os.path.exists(os.path.join(root, '.git')):
        out = subprocess.run(
            ['git', '-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
            check=True, capture_output=True).stdout.decode()
        files = sorted({f for f in out.split('\0') if f})
    else:
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ('.git', 'build'))
            rel = os.path.relpath(dirpath, root)
            files += [os.path.normpath(os.path.join(rel, f)) for f in sorted(filenames)]
    return [f for f in files if os.path.isfile(os.path.join(root, f))]


def read_text(path):
    try:
        with open(path, 'rb') as fh:
            data = fh.read()
    except OSError:
        return None
    if b'\0' in data[:8192]:
        return None
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        return None


class Checker:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.files = list_files(self.root)
        self.top = {f.split('/')[0] for f in self.files if '/' in f}
        self.anchors = Anchors()
        self.problems = []

    def report(self, where, what):
        self.problems.append(f'{where}: {what}')

    def resolve(self, rel_file, target, relative_first):
        """Absolute path of a cited file, or None when it does not exist."""
        here = os.path.dirname(os.path.join(self.root, rel_file))
        candidates = [os.path.join(here, target)]
        if not relative_first or not target.startswith('.'):
            candidates.append(os.path.join(self.root, target))
        for c in candidates:
            if os.path.isfile(c):
                return os.path.normpath(c)
        return None

    def check_anchor(self, where, path, anchor, shown):
        if anchor and anchor not in self.anchors.of(path):
            self.report(where, f'{shown}: no anchor "#{anchor}" in {os.path.relpath(path, self.root)}')

    def cited_paths(self, rel, line):
        """(start, end, path or None, anchor, shown, must_exist) for each citation on the line."""
        out = []
        for m in LINK_TARGET.finditer(line):
            target = m.group(1)
            if re.match(r'[a-z]+:', target) or target.startswith('<'):
                continue
            file_part, _, anchor = target.partition('#')
            if not file_part:
                path = os.path.join(self.root, rel)
            elif file_part.endswith('.md'):
                path = self.resolve(rel, file_part, relative_first=True)
            else:
                continue
            out.append((m.start(1), m.end(1), path, anchor, target, True))
        for m in PATH_CITE.finditer(line):
            target, anchor = m.group(1), m.group(2)
            if any(s <= m.start() < e for s, e, *_ in out):
                continue
            first = target.split('/')[0]
            ours = target.startswith('.') or ('/' in target and first in self.top)
            if not ours and not anchor:
                continue  # an outside file by name, e.g. upstream's README.md
            path = self.resolve(rel, target, relative_first=True)
            out.append((m.start(), m.end(), path, anchor, m.group(0), ours or anchor))
        return sorted(out)

    def check_file(self, rel):
        text = read_text(os.path.join(self.root, rel))
        if text is None:
            return
        is_md = rel.endswith('.md')
        last_path, last_line = None, -10
        fence = False
        lines = text.split('\n')
        for n, line in enumerate(lines, 1):
            where = f'{rel}:{n}'
            if is_md and line.lstrip().startswith('```'):
                fence = not fence
            spans = []  # (start, end, path that an anchor after it continues)
            carried = last_path if n - last_line <= 2 else None
            for start, end, path, anchor, shown, must in self.cited_paths(rel, line):
                if path is None:
                    spans.append((start, end, None))
                    if must:
                        self.report(where, f'{shown}: no such file')
                    continue
                self.check_anchor(where, path, anchor, shown)
                continues = path if path.endswith('.md') and anchor is not None else None
                spans.append((start, end, continues))
                if continues:
                    last_path, last_line = path, n
            if not (is_md and fence):
                for m in BARE_ANCHOR.finditer(line):
                    if any(s <= m.start() < e for s, e, _ in spans) or m.group(1) in CPP_DIRECTIVES:
                        continue
                    if line[:m.start()].strip() == '' and not is_md:
                        continue  # a preprocessor line or a shell comment's first word
                    before = [p for s, e, p in spans if e <= m.start()]
                    target = before[-1] if before else carried
                    if target:
                        self.check_anchor(where, target, m.group(1), '#' + m.group(1))
            context = lines[n - 2] if n > 1 else ''
            context += lines[n] if n < len(lines) else ''
            self.check_legacy(rel, where, line, context)

    def check_legacy(self, rel, where, line, context=''):
        plain = MD_LINK.sub('', line) if rel.endswith('.md') else line
        for rx, what in ((OUTSIDE_HYPHENATED, 'a document outside the repository'),
                         (OUTSIDE_PLAIN, 'a document outside the repository'),
                         (DESIGN_DANGLING, 'a document outside the repository'),
                         (DECISION, 'a decision by number: cite docs/architecture.md#<name>'),
                         (ISSUE, 'a tracker issue: cite the section that holds its reason'),
                         (SECTION_SIGN, 'a section number that names no document')):
            m = rx.search(plain)
            if m:
                self.report(where, f'legacy citation "{m.group(0).strip()}": {what}')
        if rel not in DEVIATION_HOMES and '#deviations' not in line + context:
            m = DEVIATION.search(line)
            if m:
                self.report(where, f'legacy citation "{m.group(0)}": deviation label without '
                                   f'driver-sim/README.md#deviations')

    def run(self):
        for rel in self.files:
            if rel != SELF:
                self.check_file(rel)
        return self.problems


def self_test():
    """A tiny tree with one of each problem; all must be reported, and nothing else."""
    files = {
        'docs/a.md': '# A\n\n<a id="explicit"></a>\n## Real section (2.1)\n\nSee [b](b.md#x).\n',
        'docs/b.md': '# B\n\n## X\n\nBack to [A](a.md#real-section-21) and [here](#x).\n',
        'src/ok.cc': ('// Fine: docs/a.md#explicit, #real-section-21 and docs/b.md#x.\n'
                      'enum class Kind { HARDWARE, METRICS };  // RUNTIME_VERSION is a name\n'
                      '#include "x.h"\n'
                      '// D13 histogram (D13, driver-sim/README.md#deviations)\n'),
        'driver-sim/README.md': '# sim\n\n<a id="deviations"></a>\n## Deviations\n\n| D4 | x |\n',
        'src/missing_file.cc': '// See docs/missing.md#health for why.\n',
        'src/missing_anchor.cc': '// See docs/a.md#nope, and\n// #also-nope on the next line.\n',
        'src/legacy.cc': ('// DESIGN decision 8.\n// RUNTIME.md §2.\n// DRIVER-INTERFACE §4.3\n'
                          '// STYLE 7\n// issue 8\n// (deviation D4)\n// (§3.1)\n'),
        'docs/c.md': '# C\n\nA [dead link](nowhere.md) and decision 9 here.\n',
    }
    expected = {
        'src/missing_file.cc:1': 'no such file',
        'src/missing_anchor.cc:1': 'no anchor "#nope"',
        'src/missing_anchor.cc:2': 'no anchor "#also-nope"',
        'src/legacy.cc:1': 'decision',
        'src/legacy.cc:2': 'RUNTIME.md',
        'src/legacy.cc:3': 'DRIVER-INTERFACE',
        'src/legacy.cc:4': 'STYLE 7',
        'src/legacy.cc:5': 'issue 8',
        'src/legacy.cc:6': 'deviation D4',
        'src/legacy.cc:7': '§',
        'docs/c.md:3': 'nowhere.md',
    }
    with tempfile.TemporaryDirectory() as tmp:
        write_tree(tmp, files)
        problems = Checker(tmp).run()
    failures = []
    for where, needle in expected.items():
        if not any(p.startswith(where + ':') and needle in p for p in problems):
            failures.append(f'not reported: {where} ({needle})')
    for p in problems:
        if p.split(':')[0] + ':' + p.split(':')[1] not in expected:
            failures.append(f'reported but fine: {p}')
    with tempfile.TemporaryDirectory() as tmp:
        failures += contracts.self_test(tmp)
    if 'docs/c.md:3' in expected and not any('decision 9' in p for p in problems):
        failures.append('not reported: docs/c.md:3 (decision 9)')
    for f in failures:
        print(f'self-test: {f}')
    print(f'self-test: {"FAILED" if failures else "passed"} ({len(problems)} problems found in the '
          f'sample tree)')
    return 1 if failures else 0


def write_tree(root, files):
    """Writes {relative path: text} under root: a self-test's sample tree."""
    for rel, body in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), 'w', encoding='utf-8') as fh:
            fh.write(body)


def judge_self_test(problems, expected):
    """0 when each expected phrase is in some problem and every problem has one; 1, saying which,
    otherwise."""
    failures = [f'not reported: {e}' for e in expected if not any(e in p for p in problems)]
    failures += [f'reported but fine: {p}' for p in problems if not any(e in p for e in expected)]
    for f in failures:
        print(f'self-test: {f}')
    print(f'self-test: {"FAILED" if failures else "passed"} ({len(problems)} problems found)')
    return 1 if failures else 0


def arg_parser(doc):
    """--root (default: this checkout) and --self-test, which every docs check takes."""
    ap = argparse.ArgumentParser(description=doc.split('\n')[0])
    ap.add_argument('--root', default=os.path.normpath(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')))
    ap.add_argument('--self-test', action='store_true')
    return ap


def main():
    ap = arg_parser(__doc__)
    ap.add_argument('--binary', action='append', default=[], metavar='NAME=PATH',
                    help='check the flags documents name for NAME against `PATH --help`')
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    checker = Checker(args.root)
    problems = checker.run()
    binaries = dict(b.split('=', 1) for b in args.binary)
    flags = contracts.check(checker.root, checker.files, binaries, checker.report)
    for p in problems:
        print(p)
    print(f'{len(problems)} citation problem(s)' if problems else 'citations: all resolve')
    if binaries:
        print(f'contracts: {flags} flag mentions of {len(binaries)} binaries checked against --help')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
