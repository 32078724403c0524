"""An arbiter that answers forever: 64 KiB chunks on stdout until it is killed.

argv[1]: a file it rewrites with how many bytes it managed to write so far.
"""

import os
import sys

sys.stdin.buffer.read()
chunk = b" " * 65536
written = 0
while True:
    os.write(1, chunk)
    written += len(chunk)
    with open(sys.argv[1], "w") as f:
        f.write(str(written))
