"""The controller core is pure: no clocks, sockets, files, threads or asyncio (ARCHITECTURE.md)."""

import ast
from pathlib import Path

import weir.controller

FORBIDDEN_MODULES = {"time", "socket", "threading", "asyncio", "os", "kazoo", "subprocess", "selectors"}


def test_controller_core_imports_no_io_and_reads_no_clock():
    package = Path(weir.controller.__file__).parent
    for source in sorted(package.glob("*.py")):
        text = source.read_text()
        assert "time.time" not in text and "monotonic" not in text, source
        assert "open(" not in text, source
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [(node.module or "").split(".")[0]]
            else:
                continue
            assert not set(names) & FORBIDDEN_MODULES, (source, names)
            if names == ["weir"]:
                module = node.names[0].name if isinstance(node, ast.Import) else node.module
                assert module.startswith(("weir.controller", "weir.zk.model", "weir.protocol")), (source, module)
