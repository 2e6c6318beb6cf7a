# Answers the job request with many lines at once.
import json
import os
import sys
import uuid
import _pid

_pid.record(os.getpid())
sys.stdin.readline()
line = json.dumps({"schema_version": "1.0.0", "id": str(uuid.uuid4()), "reasoning": "r",
                   "action": "THINK", "args": {}})
sys.stdout.write((line + "\n") * 1000)
sys.stdout.flush()
sys.stdin.readline()
sys.stdin.readline()
