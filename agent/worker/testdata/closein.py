# Reads the job request, closes its input, answers, and waits, still
# running.
import json
import os
import sys
import time
import uuid
import _pid

_pid.record(os.getpid())
sys.stdin.readline()
os.close(0)
sys.stdout.write(json.dumps({"schema_version": "1.0.0", "id": str(uuid.uuid4()), "reasoning": "r",
                             "action": "THINK", "args": {}}) + "\n")
sys.stdout.flush()
time.sleep(3600)
