"""The layout keeps the architecture (ARCHITECTURE.md): the pure packages do no I/O of their own
and read no clock, no module imports itself through others, and weir/ keeps its modules in the
packages that name the layers."""

import ast
from pathlib import Path

import weir

SOURCE = Path(weir.__file__).parent
PURE_PACKAGES = ("protocol", "log", "replication", "controller", "groups", "transactions", "zk", "quotas")
FORBIDDEN_IN_PURE = {"asyncio", "threading", "socket", "time", "kazoo"}
MOST_TOP_LEVEL_MODULES = 4


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in SOURCE.rglob("*.py")}
EXTENSIONS = {module_name(path) for path in SOURCE.rglob("*.c")}  # compiled: they import nothing of weir


def imported_names(path: Path) -> list[tuple[int, str]]:
    """Every module `path` names in an import, wherever the import is (functions and
    TYPE_CHECKING blocks included): (line, dotted name), relative imports resolved."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
            found.append((node.lineno, module))
    return found


def weir_dependencies(path: Path) -> set[str]:
    """The weir modules `path` imports (a name imported from a module counts as that module)."""
    deps = set()
    for _, name in imported_names(path):
        if name.startswith(tuple(EXTENSIONS)):
            continue
        while name not in MODULES and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in MODULES and name != module_name(path):
            deps.add(name)
    return deps


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_pure_packages_import_no_event_loop_thread_socket_clock_or_zookeeper_client():
    offences = []
    for package in PURE_PACKAGES:
        for path in sorted((SOURCE / package).rglob("*.py")):
            for line, name in imported_names(path):
                if name.split(".")[0] in FORBIDDEN_IN_PURE:
                    offences.append(f"{path.relative_to(SOURCE.parent)}:{line} imports {name}")
    assert not offences, "\n".join(offences)


def test_no_module_of_weir_imports_itself_through_others():
    graph = {name: weir_dependencies(path) for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_weir_keeps_its_modules_in_the_packages_that_name_the_layers():
    top_level = sorted(path.name for path in SOURCE.glob("*.py"))
    assert len(top_level) <= MOST_TOP_LEVEL_MODULES, top_level
