"""An arbiter whose answer is JSON nested 100,000 deep (json.loads would recurse out)."""

import sys

sys.stdin.buffer.read()
sys.stdout.write("[" * 100_000 + "]" * 100_000)
