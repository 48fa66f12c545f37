"""Guarantee 2: a cell may raise only the error it declares; anything else fails the build and
says where. Unit tests of the checker, then a real build of a small project with broken examples."""

from __future__ import annotations

import textwrap

import nbformat
import pytest
from conftest import BUILD_FILES, PAGE_HEADER, copy_tree, run_build
from nb_expectations import check_notebook, parse_expectation


def _cell(source, *, tags=(), expect=None, outputs=(), count=1):
    cell = nbformat.v4.new_code_cell(source, execution_count=count, outputs=list(outputs))
    if tags:
        cell.metadata["tags"] = list(tags)
    if expect is not None:
        cell.metadata["expect-error"] = expect
    return cell


def _error(ename, evalue):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])


def _problems(*cells):
    return [problem for _, problem in check_notebook(nbformat.v4.new_notebook(cells=list(cells)))]


def test_parse_expectation():
    assert parse_expectation("RuntimeError: a second time") == ("RuntimeError", "a second time")
    with pytest.raises(ValueError):
        parse_expectation("no type here")


def test_the_declared_error_passes():
    cell = _cell(
        "y.backward()",
        tags=["raises-exception"],
        expect="RuntimeError: second time",
        outputs=[_error("RuntimeError", "Trying to backward ... a second time ...")],
    )
    assert _problems(cell) == []


@pytest.mark.parametrize(
    ("cell", "complaint"),
    [
        (
            _cell(
                "f()",
                tags=["raises-exception"],
                expect="RuntimeError: x",
                outputs=[_error("TypeError", "x")],
            ),
            "got TypeError",
        ),
        (
            _cell(
                "f()",
                tags=["raises-exception"],
                expect="RuntimeError: x",
                outputs=[_error("RuntimeError", "y")],
            ),
            "containing 'x'",
        ),
        (_cell("f()", tags=["raises-exception"], expect="RuntimeError: x"), "raised nothing"),
        (
            _cell("f()", tags=["raises-exception"], outputs=[_error("RuntimeError", "x")]),
            "does not say which",
        ),
        (
            _cell("f()", expect="RuntimeError: x", outputs=[_error("RuntimeError", "x")]),
            "lacks the",
        ),
        (
            _cell("f()", outputs=[_error("ZeroDivisionError", "division by zero")]),
            "raised ZeroDivisionError",
        ),
        (_cell("f()", count=None), "not executed"),
        (_cell("f()", tags=["skip-execution"]), "must not skip"),
    ],
)
def test_every_other_outcome_is_a_problem(cell, complaint):
    problems = _problems(cell)
    assert any(complaint in problem for problem in problems), problems


BAD_PAGE = PAGE_HEADER + textwrap.dedent("""\
    # Broken on purpose

    ```{code-cell} ipython3
    :tags: [raises-exception]
    :expect-error: "TypeError: not this one"
    raise RuntimeError("a different error")
    ```

    ```{code-cell} ipython3
    1 / 0
    ```
    """)

BAD_SCRIPT = textwrap.dedent('''\
    """
    Broken on purpose
    =================

    A script that raises an exception it does not catch.
    """

    # %%
    x = 1
    raise ValueError("not caught")
    ''')


@pytest.fixture(scope="module")
def broken_build(tmp_path_factory):
    """Build a minimal project (the real configuration, one broken page, one broken script)."""
    project = copy_tree(tmp_path_factory.mktemp("broken"), BUILD_FILES)
    (project / "gallery").mkdir()
    (project / "index.md").write_text(
        "# Home\n\n```{toctree}\ndocs/bad\nauto_examples/index\n```\n"
    )
    (project / "docs" / "bad.md").write_text(BAD_PAGE)
    (project / "gallery" / "plot_bad.py").write_text(BAD_SCRIPT)
    (project / "gallery" / "README.rst").write_text("Examples\n========\n\nBroken ones.\n")
    result = run_build(project)
    again = run_build(project)  # unchanged: Sphinx would read nothing again (sphinx-doc/sphinx#725)
    return project, result, result.stdout + result.stderr, again


def test_a_broken_example_fails_the_build(broken_build):
    project, result, _, _ = broken_build
    assert result.returncode != 0


def test_a_wrong_expected_error_is_named_with_file_and_line(broken_build):
    _, _, log, _ = broken_build
    assert "docs/bad.md:14: WARNING: code cell 1 was expected to raise TypeError" in log, log[
        -3000:
    ]
    assert "got RuntimeError: a different error" in log


def test_an_undeclared_error_is_named_with_file_and_line(broken_build):
    _, _, log, _ = broken_build
    assert (
        "docs/bad.md:20: WARNING: code cell 2 raised ZeroDivisionError: division by zero" in log
    ), log[-3000:]


def test_a_failing_gallery_script_is_named_with_file_and_line(broken_build):
    _, _, log, _ = broken_build
    assert "plot_bad.py failed" in log, log[-3000:]
    assert 'plot_bad.py", line 10' in log and "ValueError: not caught" in log


def test_a_failed_build_leaves_nothing_that_looks_finished(broken_build):
    project, _, log, _ = broken_build
    assert not (project / "_build" / "html" / "index.html").exists()
    assert (project / "_build" / "html-failed").is_dir()
    kept = project / "_build" / "html-failed.log"
    assert f"the full log to {kept}" in log
    assert "code cell 2 raised ZeroDivisionError" in kept.read_text()


def test_the_next_build_fails_again_with_the_same_warnings(broken_build):
    """Sphinx reads only changed pages: an unchanged run after a failed one would not repeat the
    page's warnings and would report success (sphinx-doc/sphinx#725). The fixture built twice."""
    *_, again = broken_build
    log = again.stdout + again.stderr
    assert again.returncode != 0, log[-3000:]
    assert "docs/bad.md:20: WARNING: code cell 2 raised ZeroDivisionError" in log, log[-3000:]
