#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs check: what the documentation names must exist.

    tests/docs/check.py [FILE.md...]   (default: every *.md of the tree but
                                        CHANGELOG.md and benchmark results)

Fails, naming file and line, for
  - a repository path that does not exist: a word shaped like a path whose
    first part is a directory of the repository (`plugin/...`, `tests/...`)
    or of plugin/ or go-bindings/ (sources include "datapath/...", Go
    imports "network/..."), in prose, code spans or code blocks; a
    `{a,b}` group or a `*` in it must match something;
  - a relative link whose file is missing, or whose #anchor names no
    heading of a Markdown file;
  - a C++ name in a code span or code block, `Type::member` or
    `namespace::Type`, that the sources (plugin/ abi/ tests/ go-bindings/,
    comments and strings left out) do not have: neither the text `A::B`
    nor B in the body of a class, struct, enum or namespace A;
  - in a section whose heading says "layout", on a list item that starts
    with a directory in backticks (- `plugin/datapath/tcp/`: ...), a bare
    file name in backticks (`flow`, `flow.cpp`) not in that directory.

Before the pages, a probe page full of stale names must fail: the check
shows on every run that it can.

Not checked, by shape: absolute paths (/proc/..., /usr/...), URLs, paths
whose first part is none of the repository's directories (another
project's `pkg/network/...`), what git ignores (build/..., results),
placeholders (<...>, $VAR, ...), std:: names and IPv6 addresses. A path
or name of another project that looks like ours is declared once per file
with an HTML comment, `<!-- docs-check: foreign network/pasta -->` (names
separated by spaces).
"""

import fnmatch
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# Where a path may be rooted besides the repository's top: the C++ sources
# include "datapath/...", the Go module's packages import each other.
PATH_ROOTS = ["", "plugin", "go-bindings"]
SOURCE_DIRS = ["plugin", "abi", "tests", "go-bindings"]
SOURCE_EXTS = (".c", ".cc", ".cpp", ".h", ".hpp", ".go")

FENCE = re.compile(r"^\s*(```|~~~)")
FOREIGN = re.compile(r"<!--\s*docs-check:\s*foreign\s+(.*?)-->", re.S)
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
# A path-shaped word: parts of word characters, dots, dashes, glob and
# brace characters, at least one slash. What comes right before decides
# whether it is rooted elsewhere (/x/y, $DIR/x, ~/x, a/b already taken,
# host:port/...).
PATH_WORD = re.compile(r"(?<![\w./$~@:%=<>{}*+-])((?:\.\./|\./)*[\w][\w.+{},*-]*(?:/[\w.+{},*-]+)*/[\w.+{},*-]*)")
CXX_NAME = re.compile(r"(?<![\w:.])(~?[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)+)(\(\))?(?![\w:])")
HEX_GROUP = re.compile(r"^[0-9a-fA-F]{1,4}$")
LAYOUT_LINE = re.compile(r"^\s*[-*]\s+`([\w./-]+/)`")
NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
VERSION = re.compile(r"^v\d+(\.\d+)*$")
BARE_FILE = re.compile(r"^[a-z0-9_]+(?:\.[a-z0-9]+)?/?$")


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def top_dirs():
    """The repository's own directories at each root (tracked ones when in git)."""
    tracked = git("ls-files")
    dirs = set()
    if tracked is not None:
        for f in tracked.splitlines():
            parts = f.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
    else:
        for d, subs, _ in os.walk(ROOT):
            subs[:] = [s for s in subs if not s.startswith(".") and not s.startswith("build")]
            rel = os.path.relpath(d, ROOT)
            if rel != ".":
                dirs.add(rel)
    firsts = {}
    for base in PATH_ROOTS:
        prefix = base + "/" if base else ""
        firsts[base] = {d[len(prefix):].split("/")[0] for d in dirs
                        if d.startswith(prefix) and d != base}
    return firsts


def ignored(paths):
    """The paths git ignores (build outputs, results); outside a git
    checkout, those the top-level .gitignore's patterns match."""
    if not paths:
        return set()
    if git("rev-parse", "--git-dir") is not None:
        r = subprocess.run(["git", "-C", ROOT, "check-ignore", "--no-index", "--stdin"],
                           input="\n".join(paths), capture_output=True, text=True)
        return set(r.stdout.splitlines())
    try:
        with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as f:
            patterns = [l.strip() for l in f if l.strip() and not l.startswith(("#", "!"))]
    except OSError:
        return set()
    out = set()
    for p in paths:
        parts = p.rstrip("/").split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        for pat in patterns:
            anchored = "/" in pat.rstrip("/")
            pat = pat.strip("/")
            if any(fnmatch.fnmatch(q if anchored else q.split("/")[-1], pat) for q in prefixes):
                out.add(p)
    return out


def expand_braces(word):
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(word[:m.start()] + alt + word[m.end():])
    return out


def exists(rel):
    full = os.path.join(ROOT, rel)
    if any(c in rel for c in "*?["):
        return bool(glob.glob(full))
    # A file named without its extension: plugin/parent/stack_loop.
    return os.path.exists(full) or bool(glob.glob(glob.escape(full) + ".*"))


def slug(heading, seen):
    """GitHub's anchor for a heading."""
    s = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = "".join(c for c in s if c.isalnum() or c in " -_")
    s = s.replace(" ", "-")
    n = seen.get(s, 0)
    seen[s] = n + 1
    return s if n == 0 else f"{s}-{n}"


class Doc:
    def __init__(self, rel):
        self.rel = rel
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            self.text = f.read()
        self.lines = self.text.split("\n")
        self.foreign = set()
        for m in FOREIGN.finditer(self.text):
            self.foreign.update(m.group(1).split())
        # Code blocks (fenced, or indented after a blank line) and the
        # rest, line by line.
        self.code = [False] * len(self.lines)
        fence = None
        for i, line in enumerate(self.lines):
            m = FENCE.match(line)
            if fence:
                self.code[i] = True
                if m and m.group(1) == fence:
                    fence = None
            elif m:
                fence = m.group(1)
                self.code[i] = True
            elif line.startswith(("    ", "\t")) and i > 0 and \
                    (self.code[i - 1] or not self.lines[i - 1].strip()) and not self.in_list(i):
                self.code[i] = True
        seen = {}
        self.anchors = set()
        for i, line in enumerate(self.lines):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m and not self.code[i]:
                self.anchors.add(slug(m.group(1), seen))

    def in_list(self, i):
        """Whether line i continues a list item (an indented paragraph)."""
        for j in range(i - 1, -1, -1):
            line = self.lines[j]
            if not line.strip():
                continue
            return bool(re.match(r"^\s*([-*+]|\d+\.)\s", line)) or \
                (line.startswith("  ") and not self.code[j])
        return False

    def prose(self):
        """The text outside code blocks, code blocks blanked (offsets kept)."""
        return "\n".join(" " * len(l) if c else l for l, c in zip(self.lines, self.code))

    def line_of(self, offset):
        return self.text.count("\n", 0, offset) + 1


class Checker:
    def __init__(self):
        self.firsts = top_dirs()
        self.problems = []
        self.anchor_cache = {}
        self.sources = []
        for d in SOURCE_DIRS:
            for base, subs, files in os.walk(os.path.join(ROOT, d)):
                subs[:] = [s for s in subs if s not in ("baseline", "__pycache__")]
                for f in files:
                    if f.endswith(SOURCE_EXTS):
                        with open(os.path.join(base, f), encoding="utf-8", errors="replace") as fh:
                            self.sources.append(fh.read())
        self.code_only = [NOT_CODE.sub(" ", src) for src in self.sources]
        self.all_code = "\n".join(self.code_only)
        self.body_cache = {}
        self.pending_paths = []  # (doc, line, word, candidates)

    def report(self, doc, line, what):
        if os.path.isabs(doc.rel):
            self.problems.append(f"probe:{line}: {what}")
            return
        self.problems.append(f"{doc.rel}:{line}: {what}")

    # Paths -------------------------------------------------------------

    def path_candidates(self, word, in_code=True):
        """The repository paths word may mean, or None when it is not ours.
        In prose (not a code span or block) only a word rooted at the
        repository's top that names a file (an extension), a directory (a
        trailing slash) or goes two levels deep: "parent/child" is prose."""
        if any(c in word for c in "<>$") or "..." in word or word.startswith(("./", "../")):
            return None
        parts = word.rstrip("/").split("/")
        if any(VERSION.match(p) for p in parts):  # a tag such as go-bindings/v1.5.0
            return None
        if not in_code and not (word.endswith("/") or "." in parts[-1] or len(parts) > 2):
            return None
        cands = []
        for base in PATH_ROOTS if in_code else [""]:
            if parts[0] in self.firsts[base]:
                cands.append(os.path.join(base, word) if base else word)
        return cands or None

    def check_path_words(self, doc, text, offset_base=0, line=None, in_code=True):
        for m in PATH_WORD.finditer(text):
            word = m.group(1).rstrip(".,;:")
            if word in doc.foreign or word.rstrip("/") in doc.foreign:
                continue
            end = m.start(1) + len(word)
            rest = text[end:end + 2]
            # A call (f/g()) or a log line's label ("network/plugin: started").
            if rest[:1] == "(" or rest == ": ":
                continue
            # A Go package's identifier: network/rknp.WithPluginInfo.
            word = re.sub(r"\.[A-Z]\w*$", "", word)
            cands = self.path_candidates(word, in_code)
            if cands is None:
                continue
            ln = line if line is not None else doc.line_of(offset_base + m.start(1))
            self.pending_paths.append((doc, ln, word, cands))

    def finish_paths(self):
        expanded = {}
        for _, _, word, cands in self.pending_paths:
            for c in cands:
                expanded[c] = expand_braces(c)
        ign = ignored(sorted({p for v in expanded.values() for p in v}))
        for doc, ln, word, cands in self.pending_paths:
            ok = False
            for c in cands:
                alts = expanded[c]
                if all(exists(a) or a in ign or a.rstrip("/") + "/" in ign for a in alts):
                    ok = True
                    break
            if not ok:
                self.report(doc, ln, f"no such path in the repository: {word}")

    # Links -------------------------------------------------------------

    def anchors_of(self, rel):
        if rel not in self.anchor_cache:
            self.anchor_cache[rel] = Doc(rel).anchors
        return self.anchor_cache[rel]

    def check_links(self, doc, prose):
        for m in LINK.finditer(prose):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, anchor = target.partition("#")
            ln = doc.line_of(m.start(1))
            if path:
                rel = os.path.normpath(os.path.join(os.path.dirname(doc.rel), path))
                if rel.startswith(".."):
                    self.report(doc, ln, f"link leaves the repository: {target}")
                    continue
                if not os.path.exists(os.path.join(ROOT, rel)):
                    self.report(doc, ln, f"link to a missing file: {target}")
                    continue
            else:
                rel = doc.rel
            if anchor and rel.endswith(".md") and anchor not in self.anchors_of(rel):
                self.report(doc, ln, f"link to a missing heading: {target}")

    # C++ names -----------------------------------------------------------

    def bodies(self, owner):
        """The bodies of every class, struct, enum or namespace named owner."""
        if owner not in self.body_cache:
            head = re.compile(r"\b(?:class|struct|union|namespace|enum(?:\s+class)?)\s+(?:\w+::)*"
                              + re.escape(owner) + r"\b[^;{}()]*\{")
            found = []
            for src in self.code_only:
                for m in head.finditer(src):
                    depth, i = 1, m.end()
                    while depth and i < len(src):
                        depth += {"{": 1, "}": -1}.get(src[i], 0)
                        i += 1
                    found.append(src[m.end():i])
            self.body_cache[owner] = found
        return self.body_cache[owner]

    def cxx_name_exists(self, name):
        """A::B is in the sources' code (comments and strings left out), or
        B is declared in the body of a class, struct, enum or namespace A."""
        if re.search(r"(?<![\w:])" + re.escape(name) + r"\b", self.all_code):
            return True
        parts = name.split("::")
        owner, member = parts[-2], parts[-1].lstrip("~")
        member_re = re.compile(r"\b" + re.escape(member) + r"\b")
        return any(member_re.search(b) for b in self.bodies(owner))

    def check_cxx(self, doc, text, offset_base=0, line=None):
        for m in CXX_NAME.finditer(text):
            name = m.group(1)
            parts = name.split("::")
            if parts[0] == "std" or all(HEX_GROUP.match(p) for p in parts) or name in doc.foreign:
                continue
            if not self.cxx_name_exists(name):
                ln = line if line is not None else doc.line_of(offset_base + m.start(1))
                self.report(doc, ln, f"no such C++ name in the sources: {name}")

    # Layout lines --------------------------------------------------------

    def check_layout(self, doc, prose):
        lines = prose.split("\n")
        i = 0
        in_layout = False
        while i < len(lines):
            h = re.match(r"^#{1,6}\s+(.*)", lines[i])
            if h:
                in_layout = "layout" in h.group(1).lower()
            m = LAYOUT_LINE.match(lines[i]) if in_layout else None
            if not m:
                i += 1
                continue
            start = i
            item = [lines[i]]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and not LAYOUT_LINE.match(lines[i]):
                item.append(lines[i])
                i += 1
            text = " ".join(item)
            directory = m.group(1)
            cands = self.path_candidates(directory)
            if not cands:
                continue
            base = next((c for c in cands if os.path.isdir(os.path.join(ROOT, c))), None)
            if base is None:
                continue  # the path check reports it
            entries = os.listdir(os.path.join(ROOT, base))
            stems = {e.split(".")[0] for e in entries} | set(entries)
            for s in CODE_SPAN.finditer(text[m.end():]):
                name = s.group(2).strip()
                if not BARE_FILE.match(name) or name.rstrip("/") in doc.foreign:
                    continue
                if name.rstrip("/") not in stems:
                    self.report(doc, start + 1, f"not in {directory}: {name}")

    # One document --------------------------------------------------------

    def check(self, rel):
        doc = Doc(rel)
        prose_all = doc.prose()
        # Links first, then their targets are out of the way of the path scan.
        self.check_links(doc, prose_all)
        prose = LINK.sub(lambda m: "](" + " " * (len(m.group(0)) - 3) + ")", prose_all)
        prose = URL.sub(lambda m: " " * len(m.group(0)), prose)
        prose = FOREIGN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
        for s in CODE_SPAN.finditer(prose):
            self.check_path_words(doc, s.group(2), s.start(2))
            self.check_cxx(doc, s.group(2), s.start(2))
        outside = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
        self.check_path_words(doc, outside, in_code=False)
        for i, (line, code) in enumerate(zip(doc.lines, doc.code)):
            if code:
                line = URL.sub(" ", line)
                self.check_path_words(doc, line, line=i + 1)
                self.check_cxx(doc, line, line=i + 1)
        self.check_layout(doc, prose)


def default_docs():
    """Every Markdown page of the repository but the changelog (a history,
    naming what was) and the benchmark's result files (written by tools)."""
    tracked = git("ls-files", "--cached", "--others", "--exclude-standard", "*.md")
    if tracked is not None:
        docs = tracked.splitlines()
    else:
        docs = [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "**", "*.md"),
                                                            recursive=True)
                if not os.path.relpath(p, ROOT).startswith(("build", "."))]
    return sorted(d for d in docs if d != "CHANGELOG.md" and not
                  (d.startswith("tests/bench/baseline/") and not d.endswith("/README.md")))


# A page of stale names, each of which must be reported.
PROBE = """# Probe

## Layout

- `plugin/datapath/tcp/`: `fastpath`, `timers`

`plugin/datapath/tcp/timers.cpp` and `datapath/gone/` and
`StackLoop::input_frame` and `tcp::Timers`, [a link](#no-such-heading).
"""
PROBE_EXPECTED = ["not in plugin/datapath/tcp/: timers",
                  "no such path in the repository: plugin/datapath/tcp/timers.cpp",
                  "no such path in the repository: datapath/gone/",
                  "no such C++ name in the sources: StackLoop::input_frame",
                  "no such C++ name in the sources: tcp::Timers",
                  "link to a missing heading: #no-such-heading"]


def probe_fails(c):
    """Whether the probe page gets exactly the problems it should."""
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "probe.md")
        with open(page, "w", encoding="utf-8") as f:
            f.write(PROBE)
        c.check(page)
        c.finish_paths()
    found = sorted(p.split(": ", 1)[1] for p in c.problems)
    c.problems, c.pending_paths = [], []
    return found == sorted(PROBE_EXPECTED), found


def main(argv):
    c = Checker()
    ok, found = probe_fails(c)
    if not ok:
        print("docs check: the probe page of stale names was not reported as it should be:")
        for p in found:
            print("  " + p)
        return 1
    docs = argv or default_docs()
    for d in docs:
        rel = os.path.relpath(os.path.abspath(d), ROOT) if argv else d
        if not os.path.exists(os.path.join(ROOT, rel)):
            continue  # tracked but removed in this working tree
        c.check(rel)
    c.finish_paths()
    c.problems.sort(key=lambda p: (p.split(":")[0], int(p.split(":")[1])))
    for p in c.problems:
        print(p)
    if c.problems:
        print(f"docs check: {len(c.problems)} problem(s) in {len(docs)} files")
        return 1
    print(f"docs check: {len(docs)} files, every path, link and C++ name found")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
