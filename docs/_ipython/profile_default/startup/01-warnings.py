# matplotlib warns when placing a legend at loc="best" took long; on a busy build machine that
# depends on the load, not on the page, so it must not appear (a printed warning fails the build).
import warnings

warnings.filterwarnings("ignore", message="Creating legend with loc=")
del warnings
