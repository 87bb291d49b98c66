#!/usr/bin/env python3
"""docs/tools/check_equation_map.py -- keeps docs/equation-map.md (and the other pages that name
code and tests) from drifting away from the code. Python 3 standard library only.

What it checks (each failure is printed as one line; exit status 1 if there is any):
  1. The map's table covers every equation Eq.1 .. Eq.29 exactly once (a row may cover a range).
  2. Every equation number cited in a code comment ("Eq.N", "Eqs.N-M", "Eqs.4-5, 8", ...) under
     reference/, optimized/, walkthroughs/, proofs_tests/ and notebooks_bindings/src/ is in the map,
     in a row that names at least one implementing function.
  3. Every function named in the pages as `path:name` (or `path:Class::name`) still exists: the file
     is there and declares each part of the name (a declaration, not only a mention).
  4. Every test named as `test_<file>: <TEST_CASE name>` -- exactly the name CTest registers -- is a
     TEST_CASE in proofs_tests/test_<file>.cpp or .cu.
  5. Every walkthrough or file named as `walkthroughs/...`, `docs/...` etc. (a path in backquotes
     without ':') exists.
The pages checked (3-5): docs/equation-map.md, docs/errata.md, docs/reductions.md,
docs/derivation-chunked-forward.md, docs/README.md and docs/walkthrough-delta-rule-by-hand.md.

Usage:  check_equation_map.py [--root DIR]       check the tree (CTest: equation_map_matches_the_code)
        check_equation_map.py --self-test        mutate the map and the sources in memory and show
                                                 that each kind of drift is caught
                                                 (CTest: equation_map_check_detects_drift)
"""

import argparse
import os
import re
import sys

N_EQUATIONS = 29
MAP = "docs/equation-map.md"
PAGES = [MAP, "docs/errata.md", "docs/reductions.md", "docs/derivation-chunked-forward.md", "docs/README.md",
         "docs/walkthrough-delta-rule-by-hand.md"]
CODE_DIRS = ["reference", "optimized", "walkthroughs", "proofs_tests", "notebooks_bindings/src"]
CODE_EXT = (".hpp", ".cpp", ".cu", ".cuh", ".h", ".inc")
NO_CODE_MARK = "no separate code"

# "Eq.14", "Eqs.15-17", "Eqs.4-5, 8", "Eqs.21,25", "Eq. 3", "Eqs.26 and 28", en dash too.
CITE_RE = re.compile(r"\bEqs?\.\s?(\d+(?:\s?[-\u2013]\s?\d+)?(?:\s?(?:,|and)\s?\d+(?:\s?[-\u2013]\s?\d+)?)*)")
SPAN_RE = re.compile(r"`([^`]+)`")
TEST_SPAN_RE = re.compile(r"^(test_[A-Za-z0-9_]+): (.+)$")
FUNC_SPAN_RE = re.compile(r"^([A-Za-z0-9_./-]+\.(?:hpp|cpp|cu|cuh|h|py)):([A-Za-z_][A-Za-z0-9_:]*)$")
PATH_SPAN_RE = re.compile(r"^((?:reference|optimized|walkthroughs|proofs_tests|docs|notebooks_bindings)/[A-Za-z0-9_./-]+)$")
TEST_CASE_RE = re.compile(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')


def numbers_of(cite):
    """'4-5, 8' -> {4, 5, 8}."""
    out = set()
    for part in re.split(r"\s?(?:,|and)\s?", cite):
        m = re.match(r"(\d+)(?:\s?[-\u2013]\s?(\d+))?$", part.strip())
        if not m:
            continue
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        out.update(range(a, b + 1))
    return out


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def code_files(root):
    for d in CODE_DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(root, d)):
            dirnames[:] = [x for x in dirnames if not x.startswith(".") and x != "build"]
            for f in sorted(files):
                if f.endswith(CODE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def comments_of(text):
    """The comment text of a C++ source (// and /* */), string literals skipped."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(text[i:j])
            i = j
        elif c == "'":  # a character literal (or a digit separator: harmless)
            i += 3 if i + 2 < n and text[i + 2] == "'" else 1
        else:
            i += 1
    return "\n".join(out)


def code_citations(sources):
    """{N: sorted list of files whose comments cite Eq.N}."""
    cited = {}
    for path, text in sources.items():
        for m in CITE_RE.finditer(comments_of(text)):
            for n in numbers_of(m.group(1)):
                cited.setdefault(n, set()).add(path)
    return {n: sorted(p) for n, p in cited.items()}


def test_cases(root):
    """{'test_file: name'} of every TEST_CASE in proofs_tests/test_*.cpp and .cu."""
    names = set()
    d = os.path.join(root, "proofs_tests")
    for f in sorted(os.listdir(d)):
        if f.startswith("test_") and f.endswith((".cpp", ".cu")):
            stem = f.rsplit(".", 1)[0]
            for m in TEST_CASE_RE.finditer(read(os.path.join(d, f))):
                name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
                names.add(f"{stem}: {name}")
    return names


def strip_code(text):
    """Remove comments and string literals (so a declaration is not found in a comment)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def declares(code, name):
    """True if `code` (comments stripped) declares `name`: a type (struct/class/enum/using), or a
    function whose name follows a return type (an identifier, '>', '*' or '&', not 'return')."""
    n = re.escape(name)
    if re.search(rf"\b(?:struct|class|enum(?:\s+class)?|using|union|namespace)\s+{n}\b", code):
        return True
    for m in re.finditer(rf"([A-Za-z0-9_>*&]+)\s+(?:[A-Za-z0-9_]+::)*{n}\s*(?:<[^;(){{}}]*>)?\s*\(", code):
        if m.group(1) not in ("return", "else", "new", "delete", "throw", "case", "co_return"):
            return True
    # a macro-generated definition, e.g. LINATTN_CPU_DISPATCH(void, name, ...)
    if re.search(rf"\(\s*[A-Za-z0-9_<>:]+\s*,\s*{n}\s*,", code):
        return True
    return False


def parse_map(text):
    """Rows of the map's table: (numbers, first cell, implemented cell, tests cell, line)."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4:
            continue
        m = re.match(r"^(?:Eqs?\.\s?)?(\d+(?:\s?(?:[-\u2013]|,|and)\s?\d+)*)$", cells[0].replace("**", ""))
        if not m:
            continue
        rows.append((numbers_of(m.group(1)), cells[0], cells[2], cells[3], lineno))
    return rows


def check(root, pages=None, sources=None, tests=None):
    """All problems found, as strings. pages/sources/tests may be given (the self-test does)."""
    problems = []
    if pages is None:
        pages = {p: read(os.path.join(root, p)) for p in PAGES if os.path.exists(os.path.join(root, p))}
    if sources is None:
        sources = {p: read(os.path.join(root, p)) for p in code_files(root)}
    if tests is None:
        tests = test_cases(root)
    if MAP not in pages:
        return [f"{MAP}: missing"]

    # 1. coverage of Eq.1 .. Eq.29, each once.
    rows = parse_map(pages[MAP])
    covered = {}
    for nums, first, impl, _, lineno in rows:
        for n in nums:
            if n in covered:
                problems.append(f"{MAP}:{lineno}: Eq.{n} has a second row (first at line {covered[n][0]})")
            covered[n] = (lineno, impl)
    for n in range(1, N_EQUATIONS + 1):
        if n not in covered:
            problems.append(f"{MAP}: no row for Eq.{n}")
    for n in sorted(covered):
        if not 1 <= n <= N_EQUATIONS:
            problems.append(f"{MAP}:{covered[n][0]}: Eq.{n} is not an equation of the paper (1..{N_EQUATIONS})")
    for nums, first, impl, tcell, lineno in rows:
        has_code = any(FUNC_SPAN_RE.match(s) for s in SPAN_RE.findall(impl))
        has_test = any(TEST_SPAN_RE.match(s) or PATH_SPAN_RE.match(s) for s in SPAN_RE.findall(tcell))
        if not has_code and NO_CODE_MARK not in impl:
            problems.append(f"{MAP}:{lineno}: row {first} names no function and does not say '{NO_CODE_MARK}'")
        if has_code and not has_test:
            problems.append(f"{MAP}:{lineno}: row {first} names functions but no test or walkthrough")

    # 2. every equation cited in a code comment is in a row that names code.
    for n, files in sorted(code_citations(sources).items()):
        where = ", ".join(files[:3]) + (" ..." if len(files) > 3 else "")
        if n not in covered:
            problems.append(f"code cites Eq.{n} ({where}) but {MAP} has no row for it")
        elif NO_CODE_MARK in covered[n][1]:
            problems.append(f"code cites Eq.{n} ({where}) but {MAP} line {covered[n][0]} says '{NO_CODE_MARK}'")

    # 3-5. every function, test and path named in the pages exists.
    stripped = {}
    for page, text in sorted(pages.items()):
        for lineno, line in enumerate(text.splitlines(), 1):
            for span in SPAN_RE.findall(line):
                t = TEST_SPAN_RE.match(span)
                f = FUNC_SPAN_RE.match(span)
                p = PATH_SPAN_RE.match(span)
                if t:
                    if span not in tests:
                        problems.append(f"{page}:{lineno}: no such test: {span}")
                elif f:
                    path, name = f.group(1), f.group(2)
                    if path not in sources and not os.path.exists(os.path.join(root, path)):
                        problems.append(f"{page}:{lineno}: no such file: {path} (in `{span}`)")
                        continue
                    if path not in stripped:
                        text_ = sources.get(path)
                        if text_ is None:
                            text_ = read(os.path.join(root, path))
                        stripped[path] = strip_code(text_)
                    for part in name.split("::"):
                        if not declares(stripped[path], part):
                            problems.append(f"{page}:{lineno}: {path} declares no `{part}` (in `{span}`)")
                elif p:
                    if p.group(1) not in sources and not os.path.exists(os.path.join(root, p.group(1))):
                        problems.append(f"{page}:{lineno}: no such file: {p.group(1)}")
    return problems


def summary(root):
    pages = {p: read(os.path.join(root, p)) for p in PAGES if os.path.exists(os.path.join(root, p))}
    rows = parse_map(pages.get(MAP, ""))
    spans = [s for t in pages.values() for s in SPAN_RE.findall(t)]
    nf = len({s for s in spans if FUNC_SPAN_RE.match(s)})
    nt = len({s for s in spans if TEST_SPAN_RE.match(s)})
    return (f"{len(rows)} rows covering Eq.1-{N_EQUATIONS}; {nf} distinct functions and {nt} distinct "
            f"tests named in {len(pages)} pages ({', '.join(sorted(pages))}) exist")


def self_test(root):
    """Each kind of drift, made in memory, must be reported; the unmodified tree must pass."""
    pages = {p: read(os.path.join(root, p)) for p in PAGES if os.path.exists(os.path.join(root, p))}
    sources = {p: read(os.path.join(root, p)) for p in code_files(root)}
    tests = test_cases(root)
    failures = []
    base = check(root, pages, sources, tests)
    if base:
        failures.append("the unmodified tree already fails: " + base[0])
    text = pages[MAP]
    some_test = next(s for s in SPAN_RE.findall(text) if TEST_SPAN_RE.match(s))
    some_func = next(s for s in SPAN_RE.findall(text) if FUNC_SPAN_RE.match(s))
    func_path, func_name = FUNC_SPAN_RE.match(some_func).groups()
    first_row = next(l for l in text.splitlines() if parse_map(l))
    ref_file = "reference/delta_rules.hpp"
    cases = [
        ("a test renamed in the code",
         dict(tests=tests - {some_test})),
        ("a test renamed in the map",
         dict(pages={**pages, MAP: text.replace(some_test, some_test + " renamed", 1)})),
        ("a function deleted from its file",
         dict(sources={**sources, func_path: re.sub(rf"\b{re.escape(func_name.split('::')[-1])}\b",
                                                    func_name.split("::")[-1] + "_renamed",
                                                    sources[func_path])})),
        ("a function comment citing an equation the map lacks (Eq.30)",
         dict(sources={**sources, ref_file: sources[ref_file] + "\n/// Something new (Eq.30).\n"})),
        ("a row of the map removed",
         dict(pages={**pages, MAP: text.replace(first_row + "\n", "", 1)})),
    ]
    for what, kw in cases:
        args = dict(pages=pages, sources=sources, tests=tests)
        args.update(kw)
        got = check(root, **args)
        print(f"  {what}: {'caught' if got else 'NOT CAUGHT'}" + (f" -- {got[0]}" if got else ""))
        if not got:
            failures.append(what)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    if a.self_test:
        failures = self_test(root)
        if failures:
            print("FAIL: drift not caught: " + "; ".join(failures))
            return 1
        print("OK: every kind of drift is caught")
        return 0
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"FAIL: {len(problems)} problem(s); fix the code or docs/equation-map.md")
        return 1
    print("OK: " + summary(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
