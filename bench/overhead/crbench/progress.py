"""The harness's progress line on stderr: rewritten in place on a terminal,
one line per change otherwise (logs stay readable)."""
import sys
import time

_tty = sys.stderr.isatty()
_last = [0.0, ""]


def show(msg, force=False):
    now = time.monotonic()
    if not force and msg == _last[1]:
        return
    if _tty:
        sys.stderr.write("\r\033[Kcr_bench: " + msg)
    elif force or now - _last[0] >= 1.0:
        sys.stderr.write("cr_bench: " + msg + "\n")
    else:
        return
    sys.stderr.flush()
    _last[0], _last[1] = now, msg


def done():
    if _tty:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
