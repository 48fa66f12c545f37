# The settings of every page's kernel (tools/forking_kernel.py passes this file with --config).
# Short, colourless tracebacks: an expected error shows as "RuntimeError: <message>", with no
# temporary file paths of the build machine in the page.
c = get_config()  # noqa: F821
c.InteractiveShell.xmode = "Minimal"
c.InteractiveShell.colors = "nocolor"
c.HistoryManager.enabled = False
c.IPKernelApp.log_level = "ERROR"  # silence the start-up notice about TCP on loopback
# Figures: SVG (crisp at any width, text stays text), and the style of docs/matplotlibrc, untouched
# by the inline backend (its own rc is emptied). No metadata: with every key None matplotlib writes
# no RDF <metadata> block (not valid in HTML) and no date (two builds must agree).
c.InlineBackend.figure_formats = {"svg"}
c.InlineBackend.print_figure_kwargs = {
    "bbox_inches": "tight",
    "metadata": dict.fromkeys(("Creator", "Date", "Format", "Type")),
}
c.InlineBackend.rc = {}
c.InteractiveShellApp.exec_lines = [
    # matplotlib warns when placing a legend at loc="best" took long: on a busy build machine that
    # depends on the load, not on the page (and a printed warning fails the build).
    "import warnings; warnings.filterwarnings('ignore', message='Creating legend with loc=')",
    "del warnings",
]
