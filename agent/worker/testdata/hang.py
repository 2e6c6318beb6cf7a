# Reads the job request, starts a child of its own, and never answers.
import os
import subprocess
import sys
import _pid

child = subprocess.Popen(["sleep", "3600"])
_pid.record(os.getpid(), child.pid)
sys.stdin.readline()
child.wait()
