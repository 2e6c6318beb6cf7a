# Asks for guidance (STUCK) on a fresh job; once told where the job stands,
# answers COMPLETED with what it was told.
import json
import os
import sys
import _pid

_pid.record(os.getpid())
request = json.loads(sys.stdin.readline())
desc = request["task_description"]
if "the latest observation:" in desc:
    answer = {"action": "COMPLETED", "evidence_files": [],
              "summary_for_supervisor": "told: " + desc.rsplit("\n", 1)[-1][:400]}
else:
    answer = {"action": "STUCK", "evidence_files": [], "summary_for_supervisor": "which file?"}
sys.stdout.write(json.dumps(answer) + "\n")
sys.stdout.flush()
sys.stdin.readline()
