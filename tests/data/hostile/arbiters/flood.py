"""An arbiter that answers forever: 64 KiB chunks on stdout until it is killed.

argv[1]: a file in which it keeps, as 20 digits overwritten in place (never truncated), how
many bytes it managed to write so far.
"""

import os
import sys

sys.stdin.buffer.read()
chunk = b" " * 65536
written = 0
count = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(count, b"%020d" % written, 0)
while True:
    os.write(1, chunk)
    written += len(chunk)
    os.pwrite(count, b"%020d" % written, 0)
