#!/usr/bin/env python3
"""Module cycles in each crate of the workspace, at any depth.

Every module file (`src/a.rs`, `src/a/mod.rs`, `src/a/b.rs`) is a node.
A module depends on another when it names it, or an item in it, by a
path: `crate::a::b::Item`, `super::Item`, `super::b::Item`, `self::b`, or
a child's name (`b::Item`, `use b::{..}`). A module's own `mod b;`
declaration is not a use, nor is a re-export (`pub use b::Item`): a path
through a re-export (`crate::Item`) is a use of the module that defines
the item. Two modules that reach each other through such
uses, at whatever depth, form a cycle: the crate then has no layering
that can be drawn. `#[cfg(test)] mod tests` blocks are left out.

usage: python3 tools/layers/check.py [CRATE_DIR ...]
(default: every directory with src/lib.rs). Prints each cycle and exits
1 when there is one; prints "no module cycles" and exits 0 otherwise.
"""
import os
import re
import sys

PATH = re.compile(r"\b((?:crate|super|self)(?:::\w+)+|\b\w+(?:::\w+)+)")
USE_GROUP = re.compile(r"\buse\s+((?:crate|super|self|\w+)(?:::\w+)*)::\{([^;]*)\}\s*;", re.S)


def module_files(src):
    """Module path (tuple) -> file."""
    out = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]):
                rel = []
            out[tuple(rel)] = path
    return out


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    m = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod \w+\s*\{", text)
    return text[: m.start()] if m else text


def expand_groups(text):
    """`use a::{b, c::d}` -> also `a::b`, `a::c::d` (one level of braces)."""
    extra = []
    for prefix, inner in USE_GROUP.findall(text):
        for part in re.split(r",", re.sub(r"\{[^}]*\}", "", inner)):
            part = part.strip().split(" as ")[0].strip()
            if part and part != "self":
                extra.append(f"{prefix}::{part}")
            elif part == "self":
                extra.append(prefix)
    return text + "\n" + "\n".join(extra)


def resolve(here, path, mods):
    """The module a path names (its longest existing module prefix)."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    elif parts[0] == "super":
        base = here
        while parts and parts[0] == "super":
            base = base[:-1]
            parts = parts[1:]
        rest = parts
    elif parts[0] == "self":
        base, rest = here, parts[1:]
    else:
        # A child module named from its parent (`b::Item`).
        if here + (parts[0],) not in mods:
            return None
        base, rest = here, parts
    best = base if base in mods else None
    cur = base
    for p in rest:
        cur = cur + (p,)
        if cur in mods:
            best = cur
        else:
            break
    return best


REEXPORT = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", re.S)


def reexports(mods, texts):
    """(module, name) -> the path it re-exports, per module."""
    out = {}
    for m, text in texts.items():
        for body in REEXPORT.findall(text):
            body = " ".join(body.split())
            g = re.match(r"(.*?)::\{(.*)\}$", body)
            items = []
            if g:
                prefix, inner = g.groups()
                for part in inner.split(","):
                    part = part.strip()
                    if not part or "{" in part or "}" in part:
                        continue
                    items.append((prefix + "::" + part.split(" as ")[0].strip(),
                                  part.split(" as ")[-1].strip().split("::")[-1]))
            else:
                items.append((body.split(" as ")[0].strip(), body.split(" as ")[-1].strip().split("::")[-1]))
            for path, alias in items:
                out[(m, alias)] = path
    return out


def graph(src):
    mods = module_files(src)
    texts = {m: strip(open(f, encoding="utf-8", errors="replace").read()) for m, f in mods.items()}
    exported = reexports(mods, texts)

    def target(here, path, depth=0):
        """The module a path names, through re-exports."""
        parts = path.split("::")
        m = resolve(here, path, mods)
        if m is None or depth > 8:
            return m
        # The segment after the module: an item it may re-export.
        base = resolve(here, "::".join(parts[:-1]), mods) if len(parts) > 1 else None
        if base == m and (m, parts[-1]) in exported:
            return target(m, exported[(m, parts[-1])], depth + 1) or m
        for i in range(len(parts), 0, -1):
            head = "::".join(parts[:i])
            if resolve(here, head, mods) == m and i < len(parts):
                name = parts[i]
                if (m, name) in exported:
                    return target(m, exported[(m, name)], depth + 1) or m
                break
        return m

    g = {m: set() for m in mods}
    for m, text in texts.items():
        body = REEXPORT.sub("", text)
        for path in PATH.findall(expand_groups(body)):
            dep = target(m, path)
            if dep is not None and dep != m:
                g[m].add(dep)
    return g


def cycles(g):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
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
                out.append(comp)

    for v in g:
        if v not in index:
            visit(v)
    return out


def name(m):
    return "::".join(m) if m else "(crate root)"


def main(argv):
    crates = argv or sorted(
        d for d in {os.path.dirname(os.path.dirname(os.path.join(r, "x")))
                    for r, _, fs in os.walk(".") if "lib.rs" in fs and r.endswith("src")
                    and "/target" not in r and "/." not in r}
    )
    found = False
    for crate in crates:
        src = os.path.join(crate, "src")
        if not os.path.isfile(os.path.join(src, "lib.rs")):
            continue
        g = graph(src)
        for comp in cycles(g):
            found = True
            members = sorted(comp)
            edges = [f"{name(a)} -> {name(b)}" for a in members for b in sorted(g[a]) if b in comp]
            print(f"{crate}: cycle among {', '.join(name(m) for m in members)}: " + "; ".join(edges))
    if not found:
        print("no module cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
