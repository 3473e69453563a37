"""The size rules of the codebase (STYLE.md): product modules under 500 lines, no
class with more than 15 attributes (dataclass or pydantic fields, and what its
methods assign to ``self``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("src", "broker", "bridge", "workers", "gateway", "client-sdk/python/voxwire_client")
MAX_LINES = 500
MAX_ATTRIBUTES = 15


def _modules() -> list[Path]:
    return sorted(p for root in PRODUCT for p in (ROOT / root).rglob("*.py"))


def _attributes(cls: ast.ClassDef) -> set[str]:
    names = {
        node.target.id
        for node in cls.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and not node.target.id.isupper()
        and node.target.id != "model_config"
    }
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(method):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if (
                        isinstance(part, ast.Attribute)
                        and isinstance(part.value, ast.Name)
                        and part.value.id == "self"
                    ):
                        names.add(part.attr)
    return names


def test_the_product_code_is_found() -> None:
    assert len(_modules()) > 100


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_and_classes_stay_small(path: Path) -> None:
    text = path.read_text()
    lines = len(text.splitlines())
    assert lines <= MAX_LINES, f"{lines} lines: split the module along its seams"
    for cls in (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)):
        attributes = _attributes(cls)
        assert len(attributes) <= MAX_ATTRIBUTES, (
            f"class {cls.name} (line {cls.lineno}) has {len(attributes)} attributes: "
            f"{sorted(attributes)}"
        )
