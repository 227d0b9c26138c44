"""Print the package's structural limits and what breaks them.

The limits the core keeps (see the Architecture page of the docs):

- no function of the Cython core (``.pyx``, ``.pxd``, ``.pxi``) over 150 lines or over 10
  arguments;
- no source file of the package over 1,500 lines;
- no import circle between the package's modules (Python imports and Cython cimports);
- no type test of a data layout (``isinstance(..., RelationalMatrix)``, ``RelationBlock``,
  ``sp.issparse`` on the rows a model reads) outside the layout layer.

Usage::

    python tools/structure.py            # a table of every limit, the offenders listed
    python tools/structure.py --strict   # exit status 1 when a limit is broken

Reads the source as text: it runs nothing of the package.
"""
import argparse
import ast
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
PACKAGE = os.path.join(ROOT, "polylite")
MAX_FUNCTION_LINES = 150
MAX_ARGUMENTS = 10
MAX_FILE_LINES = 1500
# The modules where a layout may be tested by type: the layout layer itself.
LAYOUT_LAYER = ("polylite/relational.py", "polylite/_engine/layouts.py")
LAYOUT_TESTS = re.compile(r"isinstance\([^)]*\b(RelationalMatrix|RelationBlock)\b")


def _sources(extensions):
    for folder, _, names in os.walk(PACKAGE):
        for name in sorted(names):
            if name.endswith(extensions):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), path


# ---- Cython functions ---------------------------------------------------------------

_DEF = re.compile(r"^(\s*)(?:cdef|cpdef|def)\b[^=]*?\b([A-Za-z_]\w*)\s*\(")


def _split_arguments(text):
    """The top-level comma-separated arguments of a parameter list's text."""
    depth, parts, current = 0, [], ""
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip() and p.strip() not in ("*", "/")]


def cython_functions(path):
    """(name, first line, number of lines, number of arguments) of every function of a
    Cython file (``def``, ``cdef`` and ``cpdef`` functions, not ``cdef`` variables)."""
    with open(path) as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        match = _DEF.match(lines[i])
        if not match or lines[i].lstrip().startswith(("cdef class", "cdef struct",
                                                      "cdef enum", "cdef extern")):
            i += 1
            continue
        indent, name = len(match.group(1)), match.group(2)
        # The signature: up to the parenthesis that closes the parameter list.
        text, j, depth = "", i, 0
        start = lines[i].index("(", match.start(2))
        chunk = lines[i][start:]
        while True:
            for char in chunk:
                if char == "(":
                    depth += 1
                elif char == ")":
                    depth -= 1
                    if depth == 0:
                        break
                text += char
            if depth == 0 or j + 1 >= len(lines):
                break
            j += 1
            chunk = lines[j]
        header_end = j
        if not lines[header_end].rstrip().endswith(":") and "nogil" not in lines[header_end] \
                and not lines[header_end].rstrip().endswith(("noexcept", "except -1")):
            pass
        # A declaration in a .pxd (no body) is not a function to measure.
        body_start = header_end + 1
        end = body_start
        while end < len(lines):
            stripped = lines[end].strip()
            if stripped and not stripped.startswith("#"):
                if len(lines[end]) - len(lines[end].lstrip()) <= indent:
                    break
            end += 1
        while end > body_start and not lines[end - 1].strip():
            end -= 1
        if end > body_start:
            arguments = _split_arguments(text[1:])
            out.append((name, i + 1, end - i, len(arguments)))
        i = max(end, i + 1)
    return out


def python_functions(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            n = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
            if args.args and args.args[0].arg in ("self", "cls"):
                n -= 1
            out.append((node.name, node.lineno, node.end_lineno - node.lineno + 1, n))
    return out


# ---- imports ------------------------------------------------------------------------

def _module_name(relative):
    name = relative[:-len(os.path.splitext(relative)[1])].replace("/", ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def _resolve(module, level, name, package):
    if level == 0:
        return name
    parts = package.split(".")
    base = parts[:len(parts) - level + 1]
    return ".".join(base + ([name] if name else []))


_CIMPORT = re.compile(r"^\s*(?:from\s+(\.*)([\w.]*)\s+cimport\s+(.+)|cimport\s+([\w.]+))")
_PYIMPORT = re.compile(r"^\s*(?:from\s+(\.*)([\w.]*)\s+import\s+(.+)|import\s+([\w.]+))")


def _from_targets(base, names, modules):
    """What ``from base import names`` depends on: the submodules it names, and ``base``
    itself for names that are not submodules (a package's ``__init__`` that imports its
    submodules is not a circle with them)."""
    out = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
    if len(out) < len(names):
        out.append(base)
    return out


def import_graph():
    """Module -> the package's modules it imports (Python imports, those inside
    functions included, and Cython cimports)."""
    modules = {_module_name(rel): (rel, path) for rel, path in
               _sources((".py", ".pyx", ".pxd"))}
    graph = {name: set() for name in modules}
    for name, (rel, path) in modules.items():
        package = name if rel.endswith("__init__.py") else name.rsplit(".", 1)[0]
        targets = []
        if rel.endswith(".py"):
            with open(path) as f:
                tree = ast.parse(f.read())
            for node in tree.body:  # every import, those inside functions too
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    continue
                for sub in ast.walk(node):
                    if isinstance(sub, ast.ImportFrom):
                        base = _resolve(name, sub.level, sub.module or "", package)
                        targets += _from_targets(base, [a.name for a in sub.names],
                                                 modules)
                    elif isinstance(sub, ast.Import):
                        targets += [a.name for a in sub.names]
        else:
            with open(path) as f:
                for line in f:
                    match = _CIMPORT.match(line) or _PYIMPORT.match(line)
                    if not match:
                        continue
                    if match.group(4):
                        targets.append(match.group(4))
                    else:
                        base = _resolve(name, len(match.group(1)), match.group(2), package)
                        targets += _from_targets(
                            base, [a.strip().split(" ")[0] for a in
                                   match.group(3).strip("()").split(",") if a.strip()],
                            modules)
        for target in targets:
            if target in modules and target != name:
                graph[name].add(target)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


# ---- report -------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when a limit is broken")
    args = parser.parse_args(argv)
    broken = 0

    long_functions, wide_functions = [], []
    for rel, path in _sources((".pyx", ".pxd", ".pxi")):
        for name, line, length, n_args in cython_functions(path):
            if length > MAX_FUNCTION_LINES:
                long_functions.append((length, f"{rel}:{line} {name}"))
            if n_args > MAX_ARGUMENTS:
                wide_functions.append((n_args, f"{rel}:{line} {name}"))
    long_files = []
    for rel, path in _sources((".py", ".pyx", ".pxd", ".pxi")):
        with open(path) as f:
            n = sum(1 for _ in f)
        if n > MAX_FILE_LINES:
            long_files.append((n, rel))
    circles = cycles(import_graph())
    layout_tests = []
    for rel, path in _sources((".py", ".pyx")):
        if rel in LAYOUT_LAYER:
            continue
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if LAYOUT_TESTS.search(line):
                    layout_tests.append((0, f"{rel}:{number}"))

    rows = [
        (f"Cython functions over {MAX_FUNCTION_LINES} lines", long_functions),
        (f"Cython functions over {MAX_ARGUMENTS} arguments", wide_functions),
        (f"source files over {MAX_FILE_LINES} lines", long_files),
        ("import circles", [(len(c), " -> ".join(c)) for c in circles]),
        ("layout type tests outside the layout layer", layout_tests),
    ]
    width = max(len(title) for title, _ in rows)
    print(f"{'limit'.ljust(width)}  found")
    for title, found in rows:
        print(f"{title.ljust(width)}  {len(found)}")
    for title, found in rows:
        if found:
            broken += 1
            print(f"\n{title}:")
            for size, where in sorted(found, reverse=True):
                print(f"  {where}" + (f"  ({size})" if size else ""))
    return 1 if (args.strict and broken) else 0


if __name__ == "__main__":
    sys.exit(main())
