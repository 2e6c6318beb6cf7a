# Answers COMPLETED after SLOW_SECONDS.
import json
import os
import sys
import time

sys.stdin.readline()
time.sleep(float(os.environ.get("SLOW_SECONDS", "1")))
sys.stdout.write(json.dumps({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "slow but done"}) + "\n")
sys.stdout.flush()
sys.stdin.readline()
