"""The exception tree drawn in :mod:`voxwire.core.errors` matches the classes.

Every product module is imported, every :class:`VoxwireError` subclass collected,
and each must appear in the drawing under its real parent, with its module named
when it does not live in ``voxwire.core.errors``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass

import voxwire
from voxwire.core import errors
from voxwire.core.errors import VoxwireError

_LINE = re.compile(r"^[ │]*(?:[├└]── )?(?P<name>[A-Z]\w*)(?P<rest>.*)$")
_MODULE = re.compile(r"\((voxwire(?:\.\w+)+)\)\s*$")


@dataclass(frozen=True, slots=True)
class Drawn:
    name: str
    parent: str | None
    module: str


def _drawing() -> dict[str, Drawn]:
    """The classes of the docstring's tree, by name."""
    doc = errors.__doc__ or ""
    lines = [line[4:] for line in doc.splitlines() if line.startswith("    ")]
    drawn: dict[str, Drawn] = {}
    stack: list[str] = []
    for line in lines:
        match = _LINE.match(line)
        if match is None:
            continue
        depth = match.start("name") // 4
        name = match["name"]
        module = _MODULE.search(match["rest"])
        del stack[depth:]
        drawn[name] = Drawn(
            name=name,
            parent=stack[-1] if stack else None,
            module=module[1] if module else errors.__name__,
        )
        stack.append(name)
    return drawn


def _product_modules() -> list[str]:
    names = {
        info.name
        for info in pkgutil.walk_packages(voxwire.__path__, prefix="voxwire.")
        if not info.name.endswith("__main__")
    }
    for name in sorted(names):
        importlib.import_module(name)
    return sorted(names)


def _subclasses(cls: type[VoxwireError]) -> list[type[VoxwireError]]:
    found: list[type[VoxwireError]] = []
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("voxwire."):
            found.append(sub)
        found.extend(_subclasses(sub))
    return found


def test_the_drawing_is_a_tree_rooted_at_voxwire_error() -> None:
    drawn = _drawing()
    assert drawn["VoxwireError"].parent is None
    assert drawn["AudioError"].parent == "VoxwireError"
    assert drawn["ModelConversionError"].parent == "ModelError"
    assert drawn["TokenError"].parent == "AuthError"
    assert drawn["TokenError"].module == "voxwire.access.tokens"


def test_every_voxwire_error_is_drawn_under_its_parent() -> None:
    assert len(_product_modules()) > 50
    drawn = _drawing()
    classes = _subclasses(VoxwireError)
    assert len(classes) > 20
    problems: list[str] = []
    for cls in classes:
        where = f"{cls.__module__}.{cls.__qualname__}"
        entry = drawn.get(cls.__name__)
        if entry is None:
            problems.append(f"{where} is not drawn")
            continue
        parent = cls.__bases__[0].__name__
        if entry.parent != parent:
            problems.append(f"{where} is drawn under {entry.parent}, not {parent}")
        if entry.module != cls.__module__:
            problems.append(f"{where} is drawn as living in {entry.module}")
    assert not problems, "\n".join(problems)


def test_nothing_is_drawn_that_does_not_exist() -> None:
    _product_modules()
    names = {cls.__name__ for cls in _subclasses(VoxwireError)} | {"VoxwireError"}
    assert set(_drawing()) <= names
