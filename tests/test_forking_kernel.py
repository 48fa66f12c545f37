"""The forked page kernels (docs/_ext/forking_kernel.py) behave like ordinary kernels: they start
as children of the zygote, in the page's directory, with the build's environment and the site's
IPython start-up; they can be interrupted; they die with their launcher; and without a zygote the
same kernelspec starts an ordinary kernel."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import forking_kernel  # docs/_ext is on sys.path: conftest.py
import pytest
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
IPYTHON = Path(__file__).resolve().parents[1] / "docs" / "_ipython"


@pytest.fixture
def kernelspec(tmp_path, monkeypatch):
    """A python3 kernelspec that launches through a zygote socket in tmp_path (not yet started)."""
    path = str(tmp_path / "zygote")
    jupyter_dir = forking_kernel.write_kernelspec(tmp_path / "jupyter", path)
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_dir))
    monkeypatch.setenv("IPYTHONDIR", str(IPYTHON))
    monkeypatch.setenv("FORKING_KERNEL_TEST", "passed through")
    return path


@pytest.fixture
def zygote(kernelspec):
    process = forking_kernel.start(kernelspec)
    yield process
    process.terminate()
    process.wait()


def run(client, code: str, timeout: float = 60) -> str:
    """Execute code; return its stdout."""
    printed: list[str] = []

    def keep(message):
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    reply = client.execute_interactive(code, output_hook=keep, timeout=timeout)
    assert reply["content"]["status"] in {"ok", "error"}, reply
    return "".join(printed)


def gone_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` no longer exists within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def kernel(cwd: Path):
    return start_new_kernel(kernel_name="python3", cwd=str(cwd), startup_timeout=60)


def test_forked_kernel_starts_warm_in_the_pages_directory(zygote, tmp_path):
    manager, client = kernel(tmp_path)
    try:
        out = run(client, "import os, sys\nprint(os.getcwd(), sys.path[0])")
        assert out.split() == [str(tmp_path), str(tmp_path)]
        assert run(client, "print(os.environ['FORKING_KERNEL_TEST'])").strip() == "passed through"
        # the site's kernel settings reached the child: tracebacks in IPython's minimal mode
        assert run(client, "print(get_ipython().InteractiveTB.mode)").strip() == "Minimal"
        # the kernel is a child of the zygote, not of its launcher
        assert int(run(client, "print(os.getppid())")) == zygote.pid
    finally:
        manager.shutdown_kernel(now=False)
    assert not manager.is_alive()


def test_interrupt_reaches_the_forked_kernel(zygote, tmp_path):
    manager, client = kernel(tmp_path)
    try:
        client.execute(
            "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('interrupted')"
        )
        time.sleep(1)
        manager.interrupt_kernel()
        assert run(client, "print('after')", timeout=20).strip() == "after"
    finally:
        manager.shutdown_kernel(now=True)


def test_the_kernel_dies_with_its_launcher(zygote, tmp_path):
    manager, client = kernel(tmp_path)
    pid = int(run(client, "import os; print(os.getpid())"))
    launcher = manager.provisioner.process.pid
    assert pid != launcher, "the launcher fell back to an ordinary kernel (no zygote listening)"
    os.kill(launcher, signal.SIGKILL)  # the launcher, not the kernel
    if not gone_within(pid, 5):
        pytest.fail(f"forked kernel {pid} outlived its launcher")
    manager.cleanup_resources()


def test_without_a_zygote_an_ordinary_kernel_starts(kernelspec, tmp_path):
    manager, client = kernel(tmp_path)
    try:
        # the launcher replaced itself with `python -m ipykernel_launcher`: same process
        pid = int(run(client, "import os\nprint(os.getpid())"))
        assert pid == manager.provisioner.process.pid
    finally:
        manager.shutdown_kernel(now=False)


def test_the_zygote_exits_with_the_process_that_started_it(tmp_path):
    folder, socket_path = str(Path(forking_kernel.__file__).parent), str(tmp_path / "zygote")
    code = (
        f"import sys; sys.path.insert(0, {folder!r})\n"
        "import forking_kernel\n"
        f"print(forking_kernel.start({socket_path!r}).pid, flush=True)\n"
    )

    # the zygote's output goes to a file: a pipe would stay open as long as the zygote lives
    log = tmp_path / "out"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-c", code], stdout=out, check=True)
    pid = int(log.read_text())
    # it notices once its imports are done: seconds, but minutes on a busy machine
    if not gone_within(pid, 180):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the zygote outlived the process that started it")
