# Kernel settings for executing the MyST-NB pages (copied to _build/ipython by conf.py).
# Short, colourless tracebacks: an expected error shows as "RuntimeError: <message>", with no
# temporary file paths of the build machine in the page.
c = get_config()  # noqa: F821
c.InteractiveShell.xmode = "Minimal"
c.InteractiveShell.colors = "nocolor"
c.HistoryManager.enabled = False
c.IPKernelApp.log_level = "ERROR"  # silence the start-up notice about TCP on loopback
