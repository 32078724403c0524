"""An arbiter that leaves a child behind: the child holds a FIFO open for writing and sleeps.

argv[1]: the FIFO; argv[2]: "answer" (answer, then exit) or "hang" (never answer).
The child says "ready" on the FIFO before this process goes on, so the test knows it ran;
the FIFO reaches end-of-file only when every process holding it has died.
"""

import json
import subprocess
import sys

payload = json.load(sys.stdin)
child = subprocess.Popen(
    [
        sys.executable,
        "-c",
        "import sys, time\n"
        "f = open(sys.argv[1], 'w')\n"
        "f.write('ready\\n'); f.flush()\n"
        "print('up', flush=True)\n"
        "time.sleep(3600)\n",
        sys.argv[1],
    ],
    stdout=subprocess.PIPE,
    stdin=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
assert child.stdout is not None
child.stdout.readline()  # the child is up and holds the FIFO
if sys.argv[2] == "answer":
    print(json.dumps({"winner": payload["claims"][0]["claim_id"], "rationale": "first"}))
    sys.exit(0)
child.wait()
