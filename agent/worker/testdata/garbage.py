# Answers the job request with prose.
import os
import sys
import _pid

_pid.record(os.getpid())
sys.stdin.readline()
sys.stdout.write("Sure! I will write the file now.\n")
sys.stdout.flush()
sys.stdin.readline()
