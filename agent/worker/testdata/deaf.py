# Starts, records its pid, and never reads its input nor answers.
import os
import time
import _pid

_pid.record(os.getpid())
time.sleep(3600)
