"""Pages' kernels, the check of what each cell raised, and the helper modules in their downloads.

The build's ``python3`` kernelspec: this interpreter, the site's kernel settings, forked from a
process that imported torch (``tools/forking_kernel.py``; ``-D forking_kernel=0``: not forked).
``SiteProvisioner`` (jupyter_client's documented API; the JAX docs use one too) lets one kernel at a
time pick and bind its ports (parallel readers were given the same one), and waits for a kernel as
long as for a cell (nbclient's 60 s failed busy builds). Downloads get their helper modules while
the page is read: a notebook written later would be newer than its page, read again every build.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib.metadata import EntryPoint
from pathlib import Path

import forking_kernel
import nbformat
from freshness import local_modules
from internals import executed_notebook
from jupyter_client.provisioning import KernelProvisionerFactory, LocalProvisioner
from nb_expectations import check_notebook
from sphinx.util import logging
from traitlets import Float, Unicode

try:
    import fcntl
except ImportError:  # Windows: no lock, and no forked kernels
    fcntl = None

logger = logging.getLogger(__name__)
PROVISIONER = "retain-graph-site"
HELPER_TAG = "helper-module"


class SiteProvisioner(LocalProvisioner):
    startup_timeout = Float(60.0)
    lock = Unicode("")  # a file: one kernel at a time picks its ports and binds them

    async def pre_launch(self, **kwargs):
        if fcntl and self.lock:
            self._lock = open(self.lock, "w")  # held until the kernel is ready
            fcntl.flock(self._lock, fcntl.LOCK_EX)
        return await super().pre_launch(**kwargs)

    async def post_launch(self, **kwargs):
        await super().post_launch(**kwargs)
        client = self.parent.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=self.startup_timeout)
        finally:
            client.stop_channels()
            self.unlock()

    async def cleanup(self, restart: bool = False):
        self.unlock()
        await super().cleanup(restart)

    def unlock(self) -> None:
        if lock := self.__dict__.pop("_lock", None):
            lock.close()  # releases it


def start_kernels(app) -> None:
    jupyter = Path(app.doctreedir).parent / "jupyter"
    zygote = None
    if app.config.forking_kernel and hasattr(os, "fork"):
        folder = Path(tempfile.mkdtemp(prefix="kernels-"))  # short: a socket path has ~100 bytes
        zygote = str(folder / "zygote")
        process = forking_kernel.start(zygote)
        app.connect("build-finished", lambda *_: (process.kill(), shutil.rmtree(folder)))
    config = {"startup_timeout": app.config.nb_execution_timeout, "lock": str(jupyter / "lock")}
    provisioner = {"kernel_provisioner": {"provisioner_name": PROVISIONER, "config": config}}
    forking_kernel.write_kernelspec(jupyter, zygote, provisioner)
    paths = [str(jupyter), *filter(None, [os.environ.get("JUPYTER_PATH")])]
    os.environ["JUPYTER_PATH"] = os.pathsep.join(dict.fromkeys(paths))


def check_and_complete(app, doctree) -> None:
    docname = app.env.docname
    if "kernelspec" not in app.env.metadata[docname]:
        return  # not a notebook page
    if not (path := executed_notebook(app, docname)).is_file():
        return logger.warning(f"executed notebook missing: {path}", location=docname)
    notebook = nbformat.read(path, as_version=4)
    lines = notebook.metadata.get("source_map", [])
    code = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    for index, problem in check_notebook(notebook):
        where = (docname, lines[index] if index < len(lines) else None)
        logger.warning(f"code cell {code.index(index) + 1} {problem}", location=where)
    source = "\n".join(notebook.cells[i].source for i in code)
    helpers = [
        nbformat.v4.new_code_cell(
            f"%%writefile {module.name}\n{module.read_text()}",
            id=f"{HELPER_TAG}-{module.stem}",
            metadata={"tags": [HELPER_TAG], "jupyter": {"source_hidden": True}},
        )
        for module in local_modules(source, Path(app.env.doc2path(docname)).parent)
    ]
    if helpers:
        notebook.cells[code[0] : code[0]] = helpers
        nbformat.write(notebook, path)


def setup(app) -> dict:
    # Registered as the JAX docs do (no package declares its entry point); readers inherit it.
    entry = EntryPoint(
        PROVISIONER, "execution:SiteProvisioner", "jupyter_client.kernel_provisioners"
    )
    KernelProvisionerFactory.provisioners[PROVISIONER] = entry
    app.add_config_value("forking_kernel", True, "env")
    app.connect("builder-inited", start_kernels, priority=400)  # imports while the gallery runs
    app.connect("doctree-read", check_and_complete)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
