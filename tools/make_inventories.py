"""Write the vendored intersphinx inventories in docs/_inventories from the installed packages.

Why: the build must link every torch and Python name to its official page, with no network. The
official ``objects.inv`` files cannot be downloaded on the build machines, so we enumerate the
public names of the *installed* torch (the pinned version) and Python, and map each to the URL
scheme the official docs use:

* names listed in an ``autosummary :toctree: generated`` block get their own page,
  ``generated/<name>.html#<name>`` (torch functions, ``torch.Tensor`` methods, ``torch.nn``
  modules, ``torch.autograd.backward`` ...);
* a few autograd names are documented inline on ``autograd.html`` (``autoclass`` there);
* Python: ``library/<module>.html#<module>.<name>``, builtins on ``functions.html``, exceptions on
  ``exceptions.html``.

``nox -s linkcheck`` (online) confirms that the URLs exist. Run: ``nox -s inventories``.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import sys
from pathlib import Path

import sphobjinv as soi

OUT = Path(__file__).resolve().parents[1] / "docs" / "_inventories"

# Documented with ``autoclass``/``autofunction`` directly on autograd.html (not generated pages).
TORCH_INLINE = {
    "torch.autograd.Function": ("class", "autograd.html"),
    "torch.autograd.detect_anomaly": ("class", "autograd.html"),
    "torch.autograd.set_detect_anomaly": ("class", "autograd.html"),
    "torch.autograd.graph.saved_tensors_hooks": ("class", "autograd.html"),
    "torch.autograd.graph.save_on_cpu": ("class", "autograd.html"),
    "torch.autograd.graph.disable_saved_tensors_hooks": ("class", "autograd.html"),
    "torch.autograd.graph.register_multi_grad_hook": ("class", "autograd.html"),
    "torch.autograd.graph.allow_mutation_on_saved_tensors": ("class", "autograd.html"),
    "torch.autograd.graph.GradientEdge": ("class", "autograd.html"),
    "torch.autograd.graph.get_gradient_edge": ("function", "autograd.html"),
    "torch.Tensor": ("class", "tensors.html"),
}
# Names with a generated page of their own, beyond the module-level enumerations below.
TORCH_GENERATED_EXTRA = [
    "torch.autograd.backward",
    "torch.autograd.grad",
    "torch.autograd.graph.Node.name",
    "torch.autograd.graph.Node.metadata",
    "torch.autograd.graph.Node.next_functions",
    "torch.autograd.graph.Node.register_hook",
    "torch.autograd.graph.Node.register_prehook",
    "torch.autograd.graph.increment_version",
    "torch.autograd.functional.jacobian",
    "torch.autograd.functional.hessian",
    "torch.autograd.functional.vjp",
    "torch.autograd.functional.jvp",
    "torch.autograd.functional.vhp",
    "torch.autograd.functional.hvp",
    "torch.autograd.function.FunctionCtx.save_for_backward",
    "torch.autograd.function.FunctionCtx.mark_dirty",
    "torch.autograd.function.once_differentiable",
    "torch.autograd.Function.forward",
    "torch.autograd.Function.backward",
    "torch.autograd.variable.Variable",
    "torch.func.grad",
    "torch.func.functional_call",
    "torch.func.vmap",
]
TENSOR_ATTRIBUTES = {
    "grad",
    "requires_grad",
    "is_leaf",
    "grad_fn",
    "retains_grad",
    "data",
    "shape",
    "dtype",
    "device",
    "T",
    "mT",
    "H",
    "mH",
    "names",
    "ndim",
    "real",
    "imag",
}


def _role(obj: object) -> str:
    return "class" if inspect.isclass(obj) else "function"


def torch_objects() -> dict[str, tuple[str, str]]:
    """Map each documented torch name to (role, page URI)."""
    import torch

    found: dict[str, tuple[str, str]] = {}

    def generated(name: str, role: str) -> None:
        found.setdefault(name, (role, f"generated/{name}.html#$"))

    for name in sorted(getattr(torch, "__all__", [])):
        obj = getattr(torch, name, None)
        if obj is None or name.startswith("_") or inspect.ismodule(obj):
            continue
        if callable(obj):
            generated(f"torch.{name}", _role(obj))
    for module_name in ("torch.nn", "torch.optim", "torch.nn.functional"):
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [
            n for n in dir(module) if not n.startswith("_")
        ]
        for name in sorted(names):
            obj = getattr(module, name, None)
            if (
                callable(obj)
                and not inspect.ismodule(obj)
                and (inspect.isclass(obj) or getattr(obj, "__module__", "").startswith(module_name))
            ):
                generated(f"{module_name}.{name}", _role(obj))
    for name in sorted(dir(torch.Tensor)):
        if name.startswith("_"):
            continue
        if name in TENSOR_ATTRIBUTES:
            generated(f"torch.Tensor.{name}", "attribute")
        elif callable(getattr(torch.Tensor, name, None)):
            generated(f"torch.Tensor.{name}", "method")
    for name in TORCH_GENERATED_EXTRA:
        module_name, _, attr = name.rpartition(".")
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            owner = eval(
                module_name, {"torch": torch}
            )  # a class path such as torch.autograd.Function
        if not hasattr(owner, attr):
            raise SystemExit(
                f"make_inventories: {name} does not exist in torch {torch.__version__}"
            )
        role = "method" if inspect.isclass(owner) else _role(getattr(owner, attr))
        generated(name, role)
    for name, (role, page) in TORCH_INLINE.items():
        found[name] = (role, f"{page}#$")
    found["torch"] = ("module", "torch.html#module-torch")
    found["torch.autograd"] = ("module", "autograd.html#module-torch.autograd")
    found["torch.autograd.graph"] = ("module", "autograd.html#module-torch.autograd.graph")
    return found


PYTHON_MODULES = (
    "warnings",
    "time",
    "gc",
    "contextlib",
    "random",
    "math",
    "weakref",
    "sys",
    "tracemalloc",
    "functools",
    "itertools",
    "statistics",
    "timeit",
)


def python_objects() -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for name in dir(builtins):
        obj = getattr(builtins, name)
        if name.startswith("_"):
            continue
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            found[name] = ("exception", "library/exceptions.html#$")
        elif callable(obj):
            found[name] = (
                "function" if not inspect.isclass(obj) else "class",
                "library/functions.html#$",
            )
    for module_name in PYTHON_MODULES:
        module = importlib.import_module(module_name)
        found[module_name] = ("module", f"library/{module_name}.html#module-$")
        for name in getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]):
            obj = getattr(module, name, None)
            if callable(obj) and not inspect.ismodule(obj):
                found[f"{module_name}.{name}"] = (_role(obj), f"library/{module_name}.html#$")
    return found


def write(path: Path, project: str, version: str, objects: dict[str, tuple[str, str]]) -> None:
    inv = soi.Inventory()
    inv.project, inv.version = project, version
    for name in sorted(objects):
        role, uri = objects[name]
        inv.objects.append(
            soi.DataObjStr(name=name, domain="py", role=role, priority="1", uri=uri, dispname="-")
        )
    path.write_bytes(soi.compress(inv.data_file(contract=True)))
    print(f"wrote {path} ({len(objects)} objects)")


def main() -> None:
    import torch

    OUT.mkdir(exist_ok=True)
    torch_version = torch.__version__.split("+")[0]
    write(OUT / "torch.inv", "PyTorch", torch_version, torch_objects())
    write(OUT / "python.inv", "Python", "{}.{}".format(*sys.version_info[:2]), python_objects())


if __name__ == "__main__":
    main()
