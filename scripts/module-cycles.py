#!/usr/bin/env python3
"""Fail on any cycle between the modules of a crate.

Usage: scripts/module-cycles.py [CRATE_DIR...]   (default: every workspace
crate with a src/ folder)

For each crate it reads the module tree from the files (src/lib.rs or
src/main.rs, `mod NAME;` as NAME.rs or NAME/mod.rs, inline `mod NAME {`),
and every path a module names: `use` trees (braces expanded) and paths in
code that start with `crate::`, `super::` or `self::`. A module that names
another module (or an item inside it) depends on it. Between two modules
the dependency counts at the level where their paths part: `io::queue::sender`
naming `io::queue::writer::X` is an edge sender -> writer among the children
of `io::queue`; `a::b` naming `c::d` is a -> c among the crate's top-level
modules. A module naming its own ancestor or descendant is not an edge (a
parent re-exports its children, a child uses its parent's items).

Any cycle among the children of one module is reported (module paths and
the file:line of one reference for each edge); exit 1 if there is one.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*(;|\{)", re.M)
PATH_IN_CODE = re.compile(r"\b((?:crate|super|self)(?:::" + IDENT + r")+)")


def strip_comments_and_strings(text):
    """Blank out comments, string and char literals, keeping line breaks."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or text.startswith('r"', i) or text.startswith('r#"', i):
            if c == "r":
                hashes = len(text[i + 1:]) - len(text[i + 1:].lstrip("#"))
                end = '"' + "#" * hashes
                start = i + 2 + hashes
                j = text.find(end, start)
                j = n if j < 0 else j + len(end)
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"] (renames dropped)."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    depth = 0
    for i, c in enumerate(tree):
        if c == "{":
            if depth == 0:
                prefix, inner = tree[:i], tree[i + 1:tree.rindex("}")]
                parts, d, start = [], 0, 0
                for j, ch in enumerate(inner):
                    if ch == "{":
                        d += 1
                    elif ch == "}":
                        d -= 1
                    elif ch == "," and d == 0:
                        parts.append(inner[start:j])
                        start = j + 1
                parts.append(inner[start:])
                out = []
                for p in parts:
                    if not p:
                        continue
                    if p == "self":
                        out.append(prefix.rstrip(":"))
                    else:
                        out.extend(expand_use_tree(prefix + p))
                return out
            depth += 1
    return [tree]


class Crate:
    def __init__(self, root):
        self.root = root
        src = os.path.join(root, "src")
        top = next(f for f in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, f)))
        self.modules = {}  # tuple path -> (file, text offset range or None)
        self.refs = []  # (module path, referenced absolute path list, file, line)
        self.read_file((), os.path.join(src, top), src, dir_owner=True)

    def read_file(self, path, file, mod_dir, dir_owner):
        raw = open(file, encoding="utf-8").read()
        text = strip_comments_and_strings(raw)
        self.modules[path] = file
        self.scan(path, text, file, mod_dir, dir_owner, 0)

    def scan(self, path, text, file, mod_dir, dir_owner, line0):
        # Inline modules first: their bodies are scanned as their own
        # modules and blanked out of this one.
        pos = 0
        body_spans = []
        for m in MOD_DECL.finditer(text):
            if m.start() < pos:
                continue
            name, kind = m.group(1), m.group(2)
            child = path + (name,)
            if kind == ";":
                base = mod_dir if dir_owner else os.path.join(mod_dir, path[-1])
                for cand, owner in ((os.path.join(base, name + ".rs"), False),
                                    (os.path.join(base, name, "mod.rs"), True)):
                    if os.path.exists(cand):
                        self.read_file(child, cand, base if not owner else os.path.join(base, name),
                                       dir_owner=owner)
                        if owner:
                            # NAME/mod.rs: its children are in NAME/.
                            pass
                        break
                pos = m.end()
            else:
                depth, j = 1, m.end()
                while j < len(text) and depth:
                    depth += {"{": 1, "}": -1}.get(text[j], 0)
                    j += 1
                body = text[m.end():j - 1]
                start_line = line0 + text[:m.end()].count("\n")
                self.modules[child] = file
                self.scan(child, body, file, mod_dir, dir_owner, start_line)
                body_spans.append((m.end(), j - 1))
                pos = j
        own = list(text)
        for a, b in body_spans:
            for k in range(a, b):
                if own[k] != "\n":
                    own[k] = " "
        own = "".join(own)
        for m in re.finditer(r"\buse\s+([^;]+);", own):
            line = line0 + own[:m.start()].count("\n") + 1
            for p in expand_use_tree(m.group(1)):
                self.add_ref(path, p, file, line)
        for m in PATH_IN_CODE.finditer(own):
            line = line0 + own[:m.start()].count("\n") + 1
            self.add_ref(path, m.group(1), file, line)

    def add_ref(self, path, text, file, line):
        parts = [p for p in text.split("::") if p]
        if not parts:
            return
        if parts[0] == "crate":
            absolute = parts[1:]
        elif parts[0] in ("super", "self"):
            base = list(path)
            while parts and parts[0] in ("super", "self"):
                if parts.pop(0) == "super":
                    if not base:
                        return
                    base.pop()
            absolute = base + parts
        else:
            return
        self.refs.append((path, absolute, file, line))

    def module_prefix(self, absolute):
        """The longest module path that `absolute` starts with."""
        best = ()
        for i in range(1, len(absolute) + 1):
            if tuple(absolute[:i]) in self.modules:
                best = tuple(absolute[:i])
            else:
                break
        return best

    def cycles(self):
        edges = {}  # parent -> {a: {b: (file, line)}}
        for src, absolute, file, line in self.refs:
            dst = self.module_prefix(absolute)
            n = 0
            while n < min(len(src), len(dst)) and src[n] == dst[n]:
                n += 1
            if n == len(src) or n == len(dst):
                continue  # ancestor or descendant, or itself
            parent, a, b = src[:n], src[n], dst[n]
            edges.setdefault(parent, {}).setdefault(a, {}).setdefault(b, (file, line))
        found = []
        for parent, graph in sorted(edges.items()):
            for cycle in find_cycles(graph):
                found.append((parent, cycle, graph))
        return found


def find_cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def workspace_crates():
    dirs = []
    for entry in sorted(os.listdir(ROOT)):
        d = os.path.join(ROOT, entry)
        if os.path.isdir(os.path.join(d, "src")) and os.path.exists(os.path.join(d, "Cargo.toml")):
            dirs.append(d)
    checks = os.path.join(ROOT, "p2p-conn-fuzz", "checks")
    if os.path.isdir(checks):
        dirs.append(checks)
    return dirs


def main():
    crates = [os.path.abspath(a) for a in sys.argv[1:]] or workspace_crates()
    bad = False
    for root in crates:
        crate = Crate(root)
        name = os.path.relpath(root, ROOT)
        found = crate.cycles()
        if not found:
            print(f"{name}: {len(crate.modules)} modules, no cycles")
            continue
        bad = True
        for parent, cycle, graph in found:
            where = "::".join(parent) or "the crate root"
            print(f"{name}: a cycle among the children of {where}: {' <-> '.join(cycle)}")
            for a in cycle:
                for b in cycle:
                    if b in graph.get(a, {}):
                        f, line = graph[a][b]
                        print(f"    {a} -> {b}  ({os.path.relpath(f, ROOT)}:{line})")
    if bad:
        print("error: module cycles above (ARCHITECTURE.md, 'No cycles', says how to break one)",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
