"""Write the HTTP API's OpenAPI document to docs/openapi.json (a test checks it is current).

Usage: .venv/bin/python tools/openapi.py [--out docs/openapi.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from claimgraph.http.app import openapi_document

ROOT = Path(__file__).resolve().parent.parent


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "openapi.json")
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
