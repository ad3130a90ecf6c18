#!/usr/bin/env python3
"""Print each library crate's public API, one item per line, sorted, from
rustdoc JSON; check or rewrite the snapshots (`<crate>/public-api.txt`).

Usage: scripts/public-api.py [--check | --write] [CRATE...]

Builds the rustdoc JSON of the library on the stable toolchain
(RUSTC_BOOTSTRAP=1, rustdoc's `--output-format json`) with every feature an
embedder can turn on except `testkit` (the test doubles and internals of
each crate, `p2p_conn::testkit`, `p2p_conn_mconn::testkit` and
`p2p_conn_privval::testkit`, documented as having no stability promise), then walks the crate from its
root the way a user can name things: public modules, re-exports, items,
their public fields and variants, the methods of inherent impls, and the
trait impls written in the crate (auto traits, blanket impls and the
`StructuralPartialEq` marker every derived `PartialEq` brings are left
out). Each line is an item with its signature, so a diff of the snapshot
shows every API change.

--check fails (exit 1, with a diff) when a crate's API differs from its
snapshot; --write rewrites the snapshots. Without either it prints the
APIs. CRATE defaults to every library crate (CRATES below).
"""

import difflib
import json
import os
import subprocess
import sys

# Each library crate with every feature an embedder can turn on. Never
# `testkit`: leaving the feature out is what keeps `p2p_conn::testkit`,
# `p2p_conn_mconn::testkit` and `p2p_conn_privval::testkit` out of the
# snapshots.
CRATES = {
    "p2p-conn": "tokio,queue,ring,avx512,avx2,stats,codec,keyfile,nodeinfo,noise,metrics,tracing,rustcrypto",
    "p2p-conn-mconn": "tokio,ring,avx512,avx2",
    "p2p-conn-privval": "tokio,noise,ring,avx512,avx2,pkcs11,threshold,cosign-net,threshold-cluster",
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(crate, features):
    env = dict(os.environ)
    env["RUSTC_BOOTSTRAP"] = "1"
    env["RUSTDOCFLAGS"] = "-Z unstable-options --output-format json"
    # Shared with the docs.rs-style build of `cargo xtask docs`, which also
    # runs with RUSTC_BOOTSTRAP=1.
    target = os.path.join(ROOT, "target", "bootstrap")
    env["CARGO_TARGET_DIR"] = target
    subprocess.run(
        ["cargo", "doc", "-p", crate, "--no-deps", "--no-default-features",
         "--features", features, "--quiet"],
        cwd=ROOT, env=env, check=True,
    )
    with open(os.path.join(target, "doc", crate.replace("-", "_") + ".json")) as f:
        return json.load(f)


class Api:
    def __init__(self, doc, name):
        self.name = name
        self.index = doc["index"]
        self.root = doc["root"]
        self.lines = set()

    def item(self, id_):
        return self.index.get(str(id_))

    # -- types -----------------------------------------------------------
    def ty(self, t):
        if t is None:
            return "()"
        if isinstance(t, str):
            return "_" if t == "infer" else t
        (kind, v), = t.items()
        if kind == "resolved_path":
            return self.path(v)
        if kind == "generic":
            return v
        if kind == "primitive":
            return v
        if kind == "borrowed_ref":
            lt = v["lifetime"] + " " if v["lifetime"] else ""
            mut = "mut " if v["is_mutable"] else ""
            return "&" + lt + mut + self.ty(v["type"])
        if kind == "raw_pointer":
            return ("*mut " if v["is_mutable"] else "*const ") + self.ty(v["type"])
        if kind == "slice":
            return "[" + self.ty(v) + "]"
        if kind == "array":
            return "[" + self.ty(v["type"]) + "; " + v["len"] + "]"
        if kind == "tuple":
            inner = ", ".join(self.ty(x) for x in v)
            return "(" + inner + ("," if len(v) == 1 else "") + ")"
        if kind == "impl_trait":
            return "impl " + self.bounds(v)
        if kind == "dyn_trait":
            parts = [self.poly_trait(p) for p in v["traits"]]
            if v.get("lifetime"):
                parts.append(v["lifetime"])
            return "dyn " + " + ".join(parts)
        if kind == "qualified_path":
            trait = self.path(v["trait"]) if v.get("trait") else None
            base = self.ty(v["self_type"])
            head = f"<{base} as {trait}>" if trait else base
            return head + "::" + v["name"] + self.args(v.get("args"))
        if kind == "function_pointer":
            sig = v["sig"]
            ins = ", ".join(self.ty(x[1]) for x in sig["inputs"])
            out = sig.get("output")
            return f"fn({ins})" + (f" -> {self.ty(out)}" if out else "")
        return f"<{kind}>"

    def path(self, p):
        name = p["path"].split("::")[-1]
        return name + self.args(p.get("args"))

    def args(self, a):
        if not a:
            return ""
        if "angle_bracketed" in a:
            ab = a["angle_bracketed"]
            parts = []
            for x in ab["args"]:
                (k, v), = x.items() if isinstance(x, dict) else (("lifetime", x),)
                if k == "type":
                    parts.append(self.ty(v))
                elif k == "lifetime":
                    parts.append(v)
                elif k == "const":
                    parts.append(v.get("expr", "_"))
                else:
                    parts.append("_")
            for c in ab.get("constraints", []):
                binding = c.get("binding", {})
                if "equality" in binding:
                    eq = binding["equality"]
                    val = self.ty(eq["type"]) if "type" in eq else "_"
                    parts.append(f"{c['name']} = {val}")
                elif "constraint" in binding:
                    parts.append(f"{c['name']}: {self.bounds(binding['constraint'])}")
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in a:
            pa = a["parenthesized"]
            ins = ", ".join(self.ty(x) for x in pa["inputs"])
            out = pa.get("output")
            return f"({ins})" + (f" -> {self.ty(out)}" if out else "")
        return ""

    def poly_trait(self, p):
        return self.path(p["trait"])

    def bounds(self, bs):
        out = []
        for b in bs:
            (k, v), = b.items()
            if k == "trait_bound":
                m = "?" if v.get("modifier") == "maybe" else ""
                out.append(m + self.path(v["trait"]))
            elif k == "outlives":
                out.append(v)
            else:
                out.append("use<..>")
        return " + ".join(out)

    def generics(self, g):
        params = []
        for p in g.get("params", []):
            (k, v), = p["kind"].items()
            if k == "lifetime":
                params.append(p["name"])
            elif k == "type":
                if v.get("is_synthetic"):
                    continue
                s = p["name"]
                if v.get("bounds"):
                    s += ": " + self.bounds(v["bounds"])
                if v.get("default"):
                    s += " = " + self.ty(v["default"])
                params.append(s)
            elif k == "const":
                params.append(f"const {p['name']}: {self.ty(v['type'])}")
        head = "<" + ", ".join(params) + ">" if params else ""
        preds = []
        for w in g.get("where_predicates", []):
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                preds.append(f"{self.ty(bp['type'])}: {self.bounds(bp['bounds'])}")
            elif "eq_predicate" in w:
                preds.append("<eq>")
        where = " where " + ", ".join(preds) if preds else ""
        return head, where

    def sig(self, f):
        s = f["sig"]
        ins = []
        for name, t in s["inputs"]:
            if name == "self":
                rendered = self.ty(t)
                ins.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(
                    rendered, "self: " + rendered))
            else:
                ins.append(f"{name}: {self.ty(t)}")
        out = s.get("output")
        ret = f" -> {self.ty(out)}" if out else ""
        head, where = self.generics(f["generics"])
        h = f["header"]
        q = ("const " if h.get("is_const") else "") + ("async " if h.get("is_async") else "") + \
            ("unsafe " if h.get("is_unsafe") else "")
        return q, head, "(" + ", ".join(ins) + ")" + ret + where

    # -- walking ---------------------------------------------------------
    def attrs(self, it):
        marks = []
        for a in it.get("attrs", []):
            if a == "non_exhaustive" or (isinstance(a, dict) and "non_exhaustive" in a) or \
                    (isinstance(a, str) and "non_exhaustive" in a):
                marks.append("#[non_exhaustive] ")
        return "".join(marks)

    def emit(self, line):
        self.lines.add(line)

    def walk_module(self, id_, prefix, seen):
        if id_ in seen:
            return
        seen.add(id_)
        m = self.item(id_)
        for child in m["inner"]["module"]["items"]:
            self.walk(child, prefix, seen)

    def walk(self, id_, prefix, seen, alias=None):
        it = self.item(id_)
        if it is None:
            return
        (kind, v), = it["inner"].items()
        if it["visibility"] != "public" and kind != "impl":
            return
        name = alias or it["name"]
        path = f"{prefix}::{name}" if name else prefix
        if kind == "use":
            target = v.get("id")
            if target is None or self.item(target) is None:
                self.emit(f"pub use {path} = {v['source']}")
                return
            if v["is_glob"]:
                t = self.item(target)
                if "module" in t["inner"]:
                    for child in t["inner"]["module"]["items"]:
                        self.walk(child, prefix, seen)
                return
            self.walk(target, prefix, seen, alias=v["name"])
            return
        a = self.attrs(it)
        if kind == "module":
            self.emit(f"pub mod {path}")
            self.walk_module(id_, path, seen)
        elif kind == "function":
            q, g, rest = self.sig(v)
            self.emit(f"pub {q}fn {path}{g}{rest}")
        elif kind == "constant":
            self.emit(f"pub const {path}: {self.ty(v['type'])}")
        elif kind == "static":
            self.emit(f"pub static {path}: {self.ty(v['type'])}")
        elif kind == "type_alias":
            g, w = self.generics(v["generics"])
            self.emit(f"pub type {path}{g} = {self.ty(v['type'])}{w}")
        elif kind == "struct":
            g, w = self.generics(v["generics"])
            sk = v["kind"]
            if sk == "unit":
                self.emit(f"{a}pub struct {path}{g}{w};")
            elif "tuple" in sk:
                fields = [self.item(f) if f is not None else None for f in sk["tuple"]]
                shown = ", ".join(
                    ("pub " + self.ty(f["inner"]["struct_field"])) if f and f["visibility"] == "public"
                    else "_" for f in fields)
                self.emit(f"{a}pub struct {path}{g}({shown}){w}")
            else:
                plain = sk["plain"]
                self.emit(f"{a}pub struct {path}{g}{w}" +
                          (" { .. }" if plain.get("has_stripped_fields") else ""))
                for f in plain["fields"]:
                    fi = self.item(f)
                    if fi and fi["visibility"] == "public":
                        self.emit(f"pub {path}::{fi['name']}: {self.ty(fi['inner']['struct_field'])}")
            self.impls(v["impls"], path)
        elif kind == "enum":
            g, w = self.generics(v["generics"])
            self.emit(f"{a}pub enum {path}{g}{w}")
            for var in v["variants"]:
                vi = self.item(var)
                vk = vi["inner"]["variant"]["kind"]
                va = self.attrs(vi)
                if vk == "plain":
                    self.emit(f"{va}{path}::{vi['name']}")
                elif "tuple" in vk:
                    tys = ", ".join(self.ty(self.item(f)["inner"]["struct_field"])
                                    for f in vk["tuple"] if f is not None)
                    self.emit(f"{va}{path}::{vi['name']}({tys})")
                else:
                    fs = ", ".join(f"{self.item(f)['name']}: {self.ty(self.item(f)['inner']['struct_field'])}"
                                   for f in vk["struct"]["fields"])
                    self.emit(f"{va}{path}::{vi['name']} {{ {fs} }}")
            self.impls(v["impls"], path)
        elif kind == "trait":
            g, w = self.generics(v["generics"])
            sup = (": " + self.bounds(v["bounds"])) if v.get("bounds") else ""
            self.emit(f"pub trait {path}{g}{sup}{w}")
            for m in v["items"]:
                mi = self.item(m)
                (mk, mv), = mi["inner"].items()
                if mk == "function":
                    q, g2, rest = self.sig(mv)
                    self.emit(f"{path}::{q}fn {mi['name']}{g2}{rest}")
                elif mk == "assoc_type":
                    self.emit(f"{path}::type {mi['name']}")
                elif mk == "assoc_const":
                    self.emit(f"{path}::const {mi['name']}: {self.ty(mv['type'])}")
        elif kind == "macro":
            self.emit(f"pub macro {path}")

    def impls(self, ids, path):
        for i in ids:
            im = self.item(i)
            if im is None:
                continue
            v = im["inner"]["impl"]
            if v.get("is_synthetic") or v.get("blanket_impl") is not None:
                continue
            g, w = self.generics(v["generics"])
            for_ = self.ty(v["for"])
            # Name the type by the path being walked (two types may share a
            # name), keeping its generic arguments.
            own = path.rsplit("::", 1)[-1]
            if for_.startswith(own):
                for_ = path + for_[len(own):]
            if v.get("trait"):
                # `StructuralPartialEq` is the unstable marker that
                # `#[derive(PartialEq)]` adds beside every `PartialEq` it
                # writes: no user can name it on stable, so a line for it
                # says nothing the `PartialEq` line does not.
                if v["trait"]["path"].split("::")[-1] == "StructuralPartialEq":
                    continue
                neg = "!" if v.get("is_negative") else ""
                self.emit(f"impl{g} {neg}{self.path(v['trait'])} for {for_}{w}")
                continue
            for m in v["items"]:
                mi = self.item(m)
                if mi is None or mi["visibility"] != "public":
                    continue
                (mk, mv), = mi["inner"].items()
                if mk == "function":
                    q, g2, rest = self.sig(mv)
                    on = f"  [impl{g} {for_}{w}]" if g or w else ""
                    self.emit(f"pub {q}fn {path}::{mi['name']}{g2}{rest}{on}")
                elif mk == "assoc_const":
                    self.emit(f"pub const {path}::{mi['name']}: {self.ty(mv['type'])}")

    def render(self):
        self.walk_module(self.root, self.name, set())
        return sorted(self.lines)


def main():
    args = sys.argv[1:]
    mode = args.pop(0) if args and args[0] in ("--check", "--write") else None
    crates = args or list(CRATES)
    failed = False
    for crate in crates:
        if crate not in CRATES:
            sys.exit(f"error: {crate} is not a library crate here ({', '.join(CRATES)})")
        api = "\n".join(Api(build(crate, CRATES[crate]), crate.replace("-", "_")).render()) + "\n"
        snapshot = os.path.join(ROOT, crate, "public-api.txt")
        shown = os.path.relpath(snapshot, ROOT)
        if mode == "--write":
            with open(snapshot, "w") as f:
                f.write(api)
            print(f"wrote {shown} ({api.count(chr(10))} items)")
        elif mode == "--check":
            old = open(snapshot).read() if os.path.exists(snapshot) else ""
            if old != api:
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), api.splitlines(True), shown, "current API"))
                print(f"\nerror: the public API of {crate} differs from {shown}; if the change "
                      f"is meant, run scripts/public-api.py --write {crate} and commit it",
                      file=sys.stderr)
                failed = True
            else:
                print(f"public API matches {shown} ({api.count(chr(10))} items)")
        else:
            sys.stdout.write(api)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
