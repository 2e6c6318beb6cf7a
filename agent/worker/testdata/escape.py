# Starts a child that leaves the worker's process group (a session of its
# own) holding the worker's output open, records the pipe's inode, and
# never answers.
import os
import subprocess
import sys
import _pid

child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
_pid.record(os.getpid(), child.pid)
with open(os.environ["PIPEFILE"], "w") as f:
    f.write("%d\n" % os.fstat(1).st_ino)
sys.stdin.readline()
child.wait()
