# Answers the job request with one line over any bound, never ending it.
import os
import sys
import _pid

_pid.record(os.getpid())
sys.stdin.readline()
sys.stdout.write('{"action":"' + "x" * (4 << 20))
sys.stdout.flush()
sys.stdin.readline()
