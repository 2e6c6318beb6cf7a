# Starts a child that holds the worker's output open, in the worker's
# process group (a shell's "cmd &") or, with NEW_SESSION=1, in a session of
# its own; reads the job request, and exits without answering.
import os
import subprocess
import sys
import _pid

child = subprocess.Popen(["sleep", "3600"], start_new_session=os.environ.get("NEW_SESSION") == "1")
_pid.record(os.getpid(), child.pid)
sys.stdin.readline()
sys.stderr.write("worker: gone, my child stays\n")
sys.stderr.flush()
os._exit(3)
