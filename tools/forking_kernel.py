"""Start each page's kernel as a ``fork()`` of a *zygote* that imported torch once (a fresh kernel
spent 3.9 s of CPU on imports: 74 of the 130 s of CPU of a cold build). The kernelspec runs
``launch``, which passes its directory, environment and arguments to the zygote over a Unix socket,
forwards interrupts and exits with the forked kernel (which exits with it); with no zygote, it
starts an ordinary kernel. The zygote runs no page code; OpenBLAS stops its threads before a fork.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

# torch._dynamo: torch.optim imports it on a page's first optimizer (about 2 s), and torch.compile
PRELOAD = "torch torch._dynamo torch.optim numpy matplotlib.pyplot ipykernel.kernelapp".split()


def _become_kernel(conn: socket.socket, request: dict) -> None:
    """In the forked child: become ``python -m ipykernel_launcher`` as run by the launcher."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; kernels wait on children
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # as `python -m ipykernel_launcher` run there would have it
    os.environ.clear()
    os.environ.update(request["env"])
    conn.sendall(b"%d\n" % os.getpid())
    # recv returns when the launcher is gone (it never sends anything more)
    threading.Thread(target=lambda: (conn.recv(1), os._exit(1)), daemon=True).start()
    code, args = 1, request["args"]
    try:
        from ipykernel.kernelapp import IPKernelApp

        if "JPY_PARENT_PID" in os.environ:  # ipykernel reads it at import, in the zygote
            args = [*args, f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}"]
        sys.argv = [sys.executable, *args]
        IPKernelApp.launch_instance(argv=args)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)


def serve(path: str, starter: int) -> None:
    """Listen (launchers queue), import, fork a kernel per connection, until ``starter`` exits."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # the path appears only once connections are accepted
    # ipykernel sets this in a kernel when it is unset; matplotlib reads it once, at import
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for name in PRELOAD:
        importlib.import_module(name)
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
    # Until the kernel exits; or our parent (the executor) does, as a kernel's parent poller would.
    parent = os.getppid()
    conn.settimeout(1.0)
    while os.getppid() == parent:
        try:
            if not conn.recv(1):
                return 0
        except TimeoutError:
            continue
    return 1


DOCS = Path(__file__).resolve().parents[1] / "docs"
SETTINGS, STYLE = DOCS / "_ipython" / "kernel_config.py", DOCS / "matplotlibrc"


def write_kernelspec(jupyter_dir: Path, zygote: str | None, metadata: dict | None = None) -> Path:
    """The ``python3`` kernelspec: this interpreter with the site's settings, forked from ``zygote``."""
    spec = jupyter_dir / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    start = [__file__, "launch", zygote] if zygote else ["-m", "ipykernel_launcher"]
    kernel = {
        "argv": [sys.executable, *start, "-f", "{connection_file}", f"--config={SETTINGS}"],
        "env": {"IPYTHONDIR": str(jupyter_dir / "ipython"), "MATPLOTLIBRC": str(STYLE)},
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "metadata": metadata or {},
    }
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=1) + "\n")
    return jupyter_dir


def start(path: str, timeout: float = 10.0) -> subprocess.Popen:
    """Start a zygote at ``path`` with the site's figure style; return once it listens."""
    command = [sys.executable, __file__, "serve", path, str(os.getpid())]
    env = {**os.environ, "MATPLOTLIBRC": str(STYLE)}
    zygote = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and zygote.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return zygote


if __name__ == "__main__":
    command, path, *rest = sys.argv[1:]
    if command == "serve":
        serve(path, int(rest[0]))
    else:
        sys.exit(launch(path, rest))
