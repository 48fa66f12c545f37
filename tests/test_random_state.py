"""Downloads behave as their page: a page's first code cell seeds every random generator its code
draws from, and so does a gallery script's first code block (CONTRIBUTING.md, "Random state").

The build seeds nothing for a page: a reader's download starts from the page's own first cell.
Issue 37 found neighbouring-errors drawing its batches unseeded: in some runs of its download the
declared "step 0" error came at step 1. This reads the code (no build, no run), so it fails every
time, not only in the runs where the numbers happen to differ; ``tests/test_downloads_run_alone.py``
checks the outcome too (each download prints what its page printed).

What draws: torch's random functions (``torch.randn``, ``randint``, ``randperm``, ``normal``,
``bernoulli``, ``multinomial``, ...), in-place ones (``.normal_()``, ``.uniform_()``, ...),
``nn.init``, dropout, a ``DataLoader`` that shuffles, and every ``torch.nn`` layer built with
parameters (its initial weights are drawn); the ``random`` module; ``numpy.random``. The first cell
must call ``torch.manual_seed``, ``random.seed`` and ``np.random.seed`` (or make a seeded
``np.random.default_rng``) for what the page uses, before it draws.
"""

from __future__ import annotations

import ast

import pytest
from conftest import ROOT, gallery_scripts, myst_pages, read_notebook

TORCH_DRAWS = {
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal",
    "bernoulli", "multinomial", "poisson", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "feature_alpha_dropout",
}  # fmt: skip
IN_PLACE_DRAWS = {"normal_", "uniform_", "random_", "bernoulli_", "exponential_", "geometric_",
                  "cauchy_", "log_normal_"}  # fmt: skip
NO_PARAMETERS = {  # torch.nn classes whose construction draws nothing
    "ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Identity", "Flatten", "Unflatten",
    "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Parameter",
    "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
    "SmoothL1Loss", "HuberLoss", "KLDivLoss", "GELU", "SiLU", "ELU", "LeakyReLU", "Softplus",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "Upsample", "Module", "CosineSimilarity", "PairwiseDistance",
}  # fmt: skip


def dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def draws(tree: ast.AST) -> dict[str, int]:
    """{"torch" | "random" | "numpy": the first line that draws from it} in a parsed cell."""
    found: dict[str, int] = {}

    def note(kind: str, line: int) -> None:
        found[kind] = min(found.get(kind, line), line)

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        if name.startswith(("np.random.", "numpy.random.")) and last not in {"seed", "default_rng"}:
            note("numpy", node.lineno)
        elif name.startswith("random.") and last not in {"seed", "Random"}:
            note("random", node.lineno)
        elif name.startswith(("torch.", "F.", "nn.functional.")) and last in TORCH_DRAWS:
            note("torch", node.lineno)
        elif isinstance(node.func, ast.Attribute) and last in IN_PLACE_DRAWS:
            note("torch", node.lineno)
        elif name.startswith(("nn.init.", "torch.nn.init.")):
            note("torch", node.lineno)
        elif (
            name.startswith(("nn.", "torch.nn."))
            and last[:1].isupper()
            and (last not in NO_PARAMETERS)
        ):
            note("torch", node.lineno)  # a layer with parameters, or Dropout
        elif last == "DataLoader" and any(
            k.arg == "shuffle" and not (isinstance(k.value, ast.Constant) and not k.value.value)
            for k in node.keywords
        ):
            note("torch", node.lineno)
    return found


SEEDS = {
    "torch": ("torch.manual_seed",),
    "random": ("random.seed",),
    "numpy": ("np.random.seed", "numpy.random.seed", "np.random.default_rng"),
}


def seeds(tree: ast.AST) -> dict[str, int]:
    """{generator: the first line that seeds it} in a parsed cell."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            for kind, names in SEEDS.items():
                if dotted(node.func) in names:
                    found[kind] = min(found.get(kind, node.lineno), node.lineno)
    return found


def parse(code: str) -> ast.AST:
    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!"))]  # magics
    return ast.parse("\n".join(lines))


def cells_of(source) -> list[str]:
    if source.suffix == ".py":
        from sphinx_gallery.py_source_parser import split_code_and_text_blocks

        blocks = split_code_and_text_blocks(str(source))[1]
        return [text for label, text, _ in blocks if label == "code" and text.strip()]
    return [c.source for c in read_notebook(source).cells if c.cell_type == "code"]


SOURCES = [*myst_pages(), *gallery_scripts()]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_the_first_cell_seeds_what_the_page_draws(source):
    cells = cells_of(source)
    if not cells:
        return
    drawn: dict[str, tuple[int, int]] = {}  # generator -> (cell, line) of its first draw
    for number, code in enumerate(cells, 1):
        for kind, line in draws(parse(code)).items():
            drawn.setdefault(kind, (number, line))
    seeded = seeds(parse(cells[0]))
    top = parse(cells[0])  # what the first cell runs before it seeds: not its def/class bodies
    top.body = [s for s in top.body if not isinstance(s, ast.FunctionDef | ast.ClassDef)]
    first_cell_draws = draws(top)
    where = source.relative_to(ROOT)
    problems = []
    for kind, (cell, line) in sorted(drawn.items()):
        first = SEEDS[kind][0]
        if kind not in seeded:
            problems.append(
                f"{where}: code cell {cell}, line {line} draws from {kind}'s generator, and the "
                f"first code cell does not seed it: add {first}(0) to the first cell"
            )
        elif first_cell_draws.get(kind, seeded[kind]) < seeded[kind]:
            problems.append(
                f"{where}: the first cell draws ({kind}) at line {first_cell_draws[kind]}, before "
                f"it seeds at line {seeded[kind]}"
            )
    assert not problems, "\n".join(problems)
