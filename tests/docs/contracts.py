"""Flags a document names that the binary no longer has (docs/architecture.md#command-line-contracts).

A document that shows `neuron-ls --topology` makes a promise; when the flag goes, the document
must go with it. For each binary given (NAME=PATH), `PATH --help` lists the long flags it has;
every long flag that a Markdown file attributes to NAME must be among them. A flag is attributed
to NAME when it follows NAME
  - inside one inline code span (`neuron-exporter --compat`), or
  - on a line of a fenced block, up to the next command on that line, and on the indented lines
    that continue it (a contract written over several lines, as docs/architecture.md does).
Prose that names a flag without its binary is not attributed. `neuron-sim`'s own contracts are
checked by its help test; here it only ends the previous command (`neuron-sim exec -- neuron-ls
--wide` attributes --wide to neuron-ls). Standard library only.
"""
import os
import re
import subprocess

LONG_FLAG = re.compile(r'(?<![\w-])--([a-zA-Z][\w.-]*[\w])')
# Words that start a command of their own in a fenced block, ending the one before them.
OTHER_COMMANDS = ('neuron-sim', 'kubectl', 'curl', 'promtool', 'helm', 'sudo', 'tmux', 'docker',
                  'make', 'ctest', 'cmake', 'env')


def help_flags(path):
    """The long flags `path --help` prints (stdout and stderr), or None when it cannot run."""
    try:
        run = subprocess.run([path, '--help'], capture_output=True, timeout=60, check=False)
    except OSError:
        return None
    text = (run.stdout + run.stderr).decode('utf-8', errors='replace')
    return set(LONG_FLAG.findall(text))


class FlagChecker:
    def __init__(self, binaries):
        # name -> set of flags, or None when the binary could not be run
        self.flags = {name: help_flags(path) for name, path in binaries.items()}
        names = sorted(self.flags, key=len, reverse=True)
        words = names + list(OTHER_COMMANDS)
        self.checked = 0  # flag mentions attributed to a binary and looked up
        self.command = re.compile(r'(?<![\w/.-])(' + '|'.join(re.escape(w) for w in words) +
                                  r')(?![\w-])')

    def problems_at_start(self):
        return [f'{name}: `--help` could not be run' for name, f in sorted(self.flags.items())
                if f is None]

    def segments(self, text):
        """(name, flag) pairs attributed in `text`; the last command still open, or None."""
        found, current = [], None
        pos = 0
        for m in self.command.finditer(text):
            if current:
                found += [(current, f) for f in LONG_FLAG.findall(text[pos:m.start()])]
            current = m.group(1) if m.group(1) in self.flags else None
            pos = m.end()
        if current:
            found += [(current, f) for f in LONG_FLAG.findall(text[pos:])]
        return found, current

    def check_markdown(self, rel, text, report):
        fence, open_command = False, None
        for n, line in enumerate(text.split('\n'), 1):
            if line.lstrip().startswith('```'):
                fence, open_command = not fence, None
                continue
            pairs = []
            if fence:
                continues = open_command and line[:1] in (' ', '\t') and \
                    not self.command.search(line)
                if continues:
                    pairs = [(open_command, f) for f in LONG_FLAG.findall(line)]
                else:
                    pairs, open_command = self.segments(line)
            else:
                for span in re.findall(r'`([^`]+)`', line):
                    pairs += self.segments(span)[0]
            for name, flag in pairs:
                self.checked += 1
                have = self.flags.get(name)
                if have is not None and flag not in have:
                    report(f'{rel}:{n}', f'{name} --{flag}: not in `{name} --help` (a contract '
                                         f'the binary no longer has)')


def check(root, files, binaries, report):
    """Reports every flag a Markdown file among `files` attributes to a binary that lacks it;
    returns how many flag mentions were checked."""
    checker = FlagChecker(binaries)
    for p in checker.problems_at_start():
        report('contracts', p)
    for rel in files:
        if not rel.endswith('.md'):
            continue
        with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as fh:
            checker.check_markdown(rel, fh.read(), report)
    return checker.checked


def self_test(tmp):
    """Failures of the flag check on a small tree under `tmp` with two fake binaries."""
    helps = {'neuron-ls': '--root DIR\n  --wide, -w\n  --topology\n',
             'neuron-exporter': 'Options:\n  --root TEXT\n  --compat\n'}
    binaries = {}
    for name, text in helps.items():
        path = os.path.join(tmp, 'bin', name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w', encoding='utf-8') as fh:
            fh.write(f"#!/bin/sh\nprintf '%s' '{text}'\n")
        os.chmod(path, 0o755)
        binaries[name] = path
    doc = ('# D\n\n'
           '`neuron-ls --wide --gone` and `neuron-exporter --compat`; prose --never-attributed.\n'
           '```\n'
           'neuron-exporter --root DIR\n'
           '                [--compat] [--vanished]\n'
           'neuron-sim exec --root R --ignored -- neuron-ls --topology --lost\n'
           '```\n')
    expected = {'d.md:3': '--gone', 'd.md:6': '--vanished', 'd.md:7': '--lost'}
    found = []
    check(tmp, [], binaries, lambda where, what: found.append((where, what)))
    FlagChecker(binaries).check_markdown('d.md', doc, lambda w, m: found.append((w, m)))
    failures = [f'flags: not reported: {w} ({flag})' for w, flag in expected.items()
                if not any(fw == w and flag + ':' in fm for fw, fm in found)]
    failures += [f'flags: reported but fine: {w}: {m}' for w, m in found
                 if not any(w == ew and flag + ':' in m for ew, flag in expected.items())]
    return failures
