"""Start every page's Jupyter kernel by forking a process that has already imported torch.

Why: MyST-NB starts a fresh ``python3`` kernel per page, and each spends 3.9 s of CPU importing
torch, numpy, matplotlib and ipykernel (and torch._dynamo at its first optimizer) before its first
cell: 74 s of the 130 s of CPU of a cold build with ``-D forking_kernel=0`` (19 pages). Here one
*zygote* imports them once, and each kernel is a ``fork()`` of it: a fresh process with its own
memory, started in milliseconds. Pages still run each in its own new process, from the same
state, with the same IPython start-up files (seeds) and kernel configuration.

How: when the build starts (before sphinx-gallery runs, so the zygote imports meanwhile), a
``python3`` kernelspec whose command is this file's ``launch`` is written into a private
``JUPYTER_PATH`` folder in ``_build`` (so notebooks keep the standard kernel name). The launcher
sends its directory, environment and arguments to the zygote over a Unix socket, forwards
interrupts to the forked kernel and exits with it; the kernel exits when the launcher is killed.
Without a reachable zygote the launcher starts an ordinary kernel; without ``fork`` or with
``-D forking_kernel=0`` nothing changes. The zygote never runs page code, and its only other thread
is numpy's OpenBLAS pool, which OpenBLAS itself shuts down before a ``fork()`` (pthread_atfork).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# torch._dynamo: torch.optim imports it on a page's first optimizer (about 2 s), and torch.compile
PRELOAD = ("torch", "torch._dynamo", "torch.optim", "numpy", "matplotlib.pyplot", "ipykernel")


def _become_kernel(conn: socket.socket, request: dict) -> None:
    """In the forked child: take over the launcher's directory and environment, and run ipykernel
    as ``python -m ipykernel_launcher`` would. Never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; kernels wait on children
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # as `python -m ipykernel_launcher` run there would have it
    os.environ.clear()
    os.environ.update(request["env"])
    conn.sendall(b"%d\n" % os.getpid())
    # recv returns when the launcher is gone (it never sends anything more)
    threading.Thread(target=lambda: (conn.recv(1), os._exit(1)), daemon=True).start()
    code = 1
    try:
        from ipykernel.kernelapp import IPKernelApp

        args = request["args"]
        if "JPY_PARENT_PID" in os.environ:  # ipykernel reads it at import, in the zygote
            args = [*args, f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}"]
        sys.argv = [sys.executable, *args]
        IPKernelApp.launch_instance(argv=args)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(path: str, starter: int) -> None:
    """The zygote: listen first (launchers queue until the imports are done), import, then fork
    one kernel per connection. Exits when ``starter``, the process that started it, is gone."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # the path appears only once connections are accepted
    # ipykernel sets this in a kernel when it is unset; matplotlib reads it once, at import
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for name in PRELOAD:
        importlib.import_module(name)
    from ipykernel.kernelapp import IPKernelApp  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    listener.settimeout(1.0)
    while os.getppid() == starter:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        try:
            request = json.loads(conn.makefile("rb").readline())
        except (OSError, ValueError):
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            _become_kernel(conn, request)
        conn.close()


def launch(path: str, args: list[str]) -> int:
    """The kernel command jupyter_client runs: ask the zygote for a kernel, or start a plain one."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *args])
    request = {"cwd": os.getcwd(), "env": dict(os.environ), "args": args}
    conn.sendall(json.dumps(request).encode() + b"\n")
    reply = conn.makefile("rb").readline()
    if not reply.endswith(b"\n"):
        print(f"forking_kernel: the zygote at {path} did not start a kernel", file=sys.stderr)
        return 1
    kernel = int(reply)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda number, _frame: os.kill(kernel, number))
    # Wait for the kernel to exit; leave (which ends the kernel too) if our own parent, the
    # process executing the notebook, is gone, as an ordinary kernel's parent poller would.
    parent = os.getppid()
    conn.settimeout(1.0)
    while os.getppid() == parent:
        try:
            if not conn.recv(1):
                return 0
        except TimeoutError:
            continue
    return 1


# --- Sphinx side ------------------------------------------------------------------------------


def start_zygote(app) -> None:
    """Start the zygote for this build and make ``python3`` kernels fork from it."""
    if not app.config.forking_kernel or not hasattr(os, "fork"):
        return
    folder = Path(tempfile.mkdtemp(prefix="kernels-"))  # short: a socket path has ~100 bytes
    jupyter_dir = write_kernelspec(Path(app.doctreedir).parent / "jupyter", str(folder / "zygote"))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        [str(jupyter_dir), *filter(None, [os.environ.get("JUPYTER_PATH")])]
    )
    zygote = start(str(folder / "zygote"))
    app.connect("build-finished", lambda _app, _exc: stop_zygote(zygote, folder))


def write_kernelspec(jupyter_dir: Path, path: str) -> Path:
    """A ``python3`` kernelspec in ``jupyter_dir/kernels`` that launches through the zygote at
    ``path``; put ``jupyter_dir`` first on ``JUPYTER_PATH`` to use it."""
    spec = jupyter_dir / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, __file__, "launch", path, "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3 (ipykernel)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=1) + "\n")
    return jupyter_dir


def start(path: str, timeout: float = 10.0) -> subprocess.Popen:
    """Start a zygote listening at ``path`` (it exits with the process that started it). Returns
    once it listens: a launcher that found no socket would fall back to an ordinary kernel."""
    command = [sys.executable, __file__, "serve", path, str(os.getpid())]
    zygote = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and zygote.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return zygote


def stop_zygote(zygote: subprocess.Popen, folder: Path) -> None:
    zygote.terminate()
    zygote.wait()
    for leftover in folder.iterdir():
        leftover.unlink()
    folder.rmdir()


def setup(app):
    app.add_config_value("forking_kernel", True, "env")
    # before sphinx-gallery's handler (priority 500) runs the scripts: the zygote imports meanwhile
    app.connect("builder-inited", start_zygote, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    command, path, *rest = sys.argv[1:]
    if command == "serve":
        serve(path, int(rest[0]))
    else:
        sys.exit(launch(path, rest))
