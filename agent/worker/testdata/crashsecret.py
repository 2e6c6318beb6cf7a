# Reads the job request, then dies without answering, its error output
# naming secrets: a provider's key, a token of the operator's own pattern,
# and a key that the 500 bytes the reason keeps would cut in two.
import sys
import _pid

_pid.record(__import__("os").getpid())
sys.stdin.readline()
head = "worker: calling the API with sk-live0123456789abcdefghij failed; corp-token-SECRETVALUE42 refused "
# The last key starts 10 bytes before the cut at 500: what the cut leaves
# of it is too short to match the pattern of such keys.
sys.stderr.write(head + "x" * (490 - len(head) - 1) + " sk-cut0123456789abcdefghijklmn\n")
sys.exit(3)
