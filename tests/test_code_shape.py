"""Size as a signal to look (STYLE.md): a function's body over about 80 lines
does more than one thing, so it fails here; a module over about 600 lines is
looked at, and either split along its seams or, when it is one concern, named
in :data:`ONE_CONCERN` with the reason. Classes have no cap: a value type has
the fields its concept has."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("src", "broker", "bridge", "workers", "gateway", "client-sdk/python/voxwire_client")
MODULE_LINES = 600
FUNCTION_LINES = 80

ONE_CONCERN: dict[str, str] = {}
"""Modules over :data:`MODULE_LINES` kept whole, by path, with why."""


def _modules() -> list[Path]:
    return sorted(p for root in PRODUCT for p in (ROOT / root).rglob("*.py"))


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of the body, without the signature and the docstring."""
    body = function.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    last = body[-1].end_lineno or body[-1].lineno
    return last - body[0].lineno + 1


def test_the_product_code_is_found() -> None:
    assert len(_modules()) > 100


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_functions_do_one_thing(path: Path) -> None:
    tree = ast.parse(path.read_text())
    long = {
        f"{node.name} (line {node.lineno}): {_body_lines(node)} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _body_lines(node) > FUNCTION_LINES
    }
    assert not long, f"split these along their steps: {sorted(long)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_long_modules_are_looked_at(path: Path) -> None:
    name = str(path.relative_to(ROOT))
    lines = len(path.read_text().splitlines())
    if lines > MODULE_LINES:
        assert name in ONE_CONCERN, (
            f"{lines} lines: split it along its seams, or name it in ONE_CONCERN with the reason"
        )
    else:
        assert name not in ONE_CONCERN, "it is no longer long: take it out of ONE_CONCERN"
