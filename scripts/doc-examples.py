#!/usr/bin/env python3
"""Build each document's examples as a user's crate would.

The documents are the one source: for each of them this script generates a
small Cargo project under docs/examples/<crate>/ (not a workspace member)
whose Cargo.toml is the [dependencies] block the document recommends, with
a path to this checkout's crate added to each line naming a library crate
(p2p-conn, p2p-conn-mconn, p2p-conn-privval) and nothing else changed, and whose src/ holds the document's Rust code blocks, one
module per block. Building those projects (.ci/run does) is then building
the examples exactly as a reader who copies them would, with the features
the document's line gives and the crates it lists, not the features the
library's own doctests happen to be built with.

Conventions in the documents:
- A ```toml block holding a `[dependencies]` line defines a crate: its
  uncommented lines are the crate's dependencies. The document's first
  such block defines its main crate (named after the document); a block
  right after a `<!-- example crate: NAME -->` line defines crate NAME.
- Every ```rust block (not `ignore`) belongs to the main crate, or to NAME
  when it follows `<!-- example crate: NAME -->`. Lines that rustdoc hides
  (`# ...`) are part of the code. Blocks must be items (functions, `use`s);
  rustdoc's own wrapping in `fn main` is not reproduced. A crate whose one
  Rust block defines `fn main` is a program: the block is its
  `src/main.rs`, which the tests build and run against real nodes.
- Every line naming a library crate (`p2p-conn = ...`, `p2p-conn-mconn =
  ...`, `p2p-conn-privval = ...`) in any of the documents, commented or
  not, must be one of the lines recommended in docs/library-guide.md
  (those lines of its crates), so the documents cannot drift apart.

  scripts/doc-examples.py --write   regenerate docs/examples/
  scripts/doc-examples.py --check   fail when docs/examples/ is not what the
                                    documents say, or a line differs
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "examples"
# document -> its main crate's name
DOCS = {
    "README.md": "readme",
    "p2p-conn/README.md": "crate-readme",
    "p2p-conn-mconn/README.md": "mconn-readme",
    "p2p-conn-privval/README.md": "privval-readme",
    "docs/library-guide.md": "library-guide",
    "docs/embedding.md": "embedding",
    "docs/profiling.md": "profiling",
}
GUIDE = "docs/library-guide.md"
MARK = re.compile(r"^<!-- example crate: ([a-z0-9-]+) -->$")
# A program's `fn main`.
MAIN = re.compile(r"^(async\s+)?fn\s+main\s*\(")
# A dependency on one of this repository's library crates.
P2P_LINE = re.compile(r"^p2p-conn(-mconn|-privval)?\s*=")


def blocks(text):
    """(info string, code lines, crate marker or None) of each fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            info = line[3:].strip()
            marker = None
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            if j >= 0 and MARK.match(lines[j].strip()):
                marker = MARK.match(lines[j].strip()).group(1)
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            yield info, body, marker
        i += 1


def unhide(line):
    """A rustdoc hidden line (`# code` or a lone `#`) as the code it hides."""
    if line.strip() == "#":
        return ""
    stripped = line.lstrip()
    if stripped.startswith("# "):
        return line[: len(line) - len(stripped)] + stripped[2:]
    return line


def p2p_lines(text):
    """Every p2p-conn dependency line in a document, commented or not."""
    for _, body, _ in blocks(text):
        for line in body:
            bare = line.strip().lstrip("#").strip()
            if P2P_LINE.match(bare):
                yield bare


def parse(doc):
    """crate name -> {"deps": [lines], "rust": [blocks]} for one document."""
    text = (ROOT / doc).read_text()
    main = DOCS[doc]
    crates = {}
    for info, body, marker in blocks(text):
        lang = info.split(",")[0].strip()
        name = marker or main
        if lang == "toml" and any(l.strip() == "[dependencies]" for l in body):
            crate = crates.setdefault(name, {"deps": None, "rust": []})
            if crate["deps"] is not None:
                sys.exit(f"error: {doc}: two [dependencies] blocks for crate {name}")
            crate["deps"] = [
                l.strip() for l in body if l.strip() and not l.strip().startswith("#")
                and l.strip() != "[dependencies]"
            ]
        elif lang == "rust" and "ignore" not in info:
            crates.setdefault(name, {"deps": None, "rust": []})["rust"].append(
                [unhide(l) for l in body]
            )
    for name, crate in crates.items():
        if crate["deps"] is None:
            sys.exit(f"error: {doc}: Rust examples for crate {name} but no [dependencies] block")
        if not any(P2P_LINE.match(l) for l in crate["deps"]):
            sys.exit(f"error: {doc}: crate {name}'s [dependencies] names none of the library crates")
    return text, crates


def with_path(line):
    """A document's line for a library crate, with a path to this
    checkout's crate added."""
    crate = re.match(r"^(p2p-conn(?:-mconn|-privval)?)", line).group(1)
    path = f'path = "../../../{crate}"'
    m = re.match(r'^p2p-conn(?:-mconn|-privval)?\s*=\s*"([^"]+)"$', line)
    if m:
        return f'{crate} = {{ version = "{m.group(1)}", {path} }}'
    m = re.match(r"^(p2p-conn(?:-mconn|-privval)?\s*=\s*\{)(.*)\}$", line)
    if not m:
        sys.exit(f"error: cannot add a path to: {line}")
    return f"{m.group(1)} {path},{m.group(2).rstrip()} }}"


def module_name(code, taken):
    m = re.search(r"\bfn\s+([a-z_][a-z0-9_]*)", "\n".join(code))
    base = m.group(1) if m else "example"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def generate():
    """path (relative to ROOT) -> content of every generated file."""
    files = {}
    recommended = None
    texts = {}
    for doc in DOCS:
        text, crates = parse(doc)
        texts[doc] = text
        if doc == GUIDE:
            recommended = {l for c in crates.values() for l in c["deps"] if P2P_LINE.match(l)}
        for name, crate in crates.items():
            base = f"docs/examples/{name}"
            deps = [with_path(l) if P2P_LINE.match(l) else l for l in crate["deps"]]
            files[f"{base}/Cargo.toml"] = "\n".join(
                [
                    f"# Generated from {doc} by scripts/doc-examples.py --write: its",
                    "# [dependencies] block, with a path to this checkout's crates.",
                    "# Edit the document, not this file.",
                    "[package]",
                    f'name = "doc-example-{name}"',
                    'version = "0.0.0"',
                    'edition = "2021"',
                    "publish = false",
                    "",
                    "# A project of its own, not a member of the p2p-conn workspace.",
                    "[workspace]",
                    "",
                    "[dependencies]",
                    *deps,
                    "",
                ]
            )
            if any(MAIN.match(l) for code in crate["rust"] for l in code):
                if len(crate["rust"]) != 1:
                    sys.exit(f"error: {doc}: crate {name} has a `fn main` and more than one Rust block")
                files[f"{base}/src/main.rs"] = "\n".join(
                    [
                        f"// Generated from a Rust block of {doc}; edit the document.",
                        "#![deny(warnings)]",
                        *crate["rust"][0],
                        "",
                    ]
                )
                continue
            taken = set()
            mods = []
            for code in crate["rust"]:
                mod = module_name(code, taken)
                mods.append(mod)
                files[f"{base}/src/{mod}.rs"] = "\n".join(
                    [f"// Generated from a Rust block of {doc}; edit the document.", *code, ""]
                )
            files[f"{base}/src/lib.rs"] = "\n".join(
                [
                    f"//! {doc}'s Rust examples, one module per code block, built with the",
                    "//! Cargo line the document recommends. Generated by",
                    "//! scripts/doc-examples.py --write; edit the document.",
                    "#![deny(warnings)]",
                    "// The examples are functions nobody here calls.",
                    "#![allow(dead_code)]",
                    "",
                    *[f"mod {m};" for m in mods],
                    "",
                ]
            )
    errors = []
    if not recommended:
        errors.append(f"{GUIDE} recommends no p2p-conn line")
    for doc, text in texts.items():
        for line in p2p_lines(text):
            if line not in recommended:
                errors.append(f"{doc}: `{line}` is not one of {GUIDE}'s recommended lines")
    return files, errors


def main():
    mode = sys.argv[1] if len(sys.argv) == 2 else ""
    if mode not in ("--write", "--check"):
        sys.exit(__doc__)
    files, errors = generate()
    if errors:
        sys.exit("error:\n  " + "\n  ".join(errors))
    present = {
        str(p.relative_to(ROOT))
        for p in OUT.rglob("*")
        if p.is_file() and p.suffix in (".rs", ".toml")
    }
    if mode == "--write":
        for stale in present - files.keys():
            (ROOT / stale).unlink()
        for path, content in files.items():
            target = ROOT / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        print(f"wrote {len(files)} files under docs/examples/")
        return
    wrong = sorted(
        p for p, c in files.items()
        if not (ROOT / p).is_file() or (ROOT / p).read_text() != c
    )
    stale = sorted(present - files.keys())
    if wrong or stale:
        sys.exit(
            "error: docs/examples/ differs from the documents "
            "(run scripts/doc-examples.py --write):\n  "
            + "\n  ".join([f"differs: {p}" for p in wrong] + [f"stale: {p}" for p in stale])
        )
    print(f"docs/examples/ matches the documents ({len(files)} files)")


if __name__ == "__main__":
    main()
