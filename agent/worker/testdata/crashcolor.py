# Reads the job request, then dies without answering, its error output in
# colour (as a terminal-minded tool writes it) and with a NUL.
import sys
import _pid

_pid.record(__import__("os").getpid())
sys.stdin.readline()
sys.stderr.write("\x1b[31mworker: out of ideas\x1b[0m\x00\x07\n")
sys.exit(3)
