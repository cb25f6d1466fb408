"""Generate the gRPC code of protos/agentd/v1 into client/agentd_client/v1 (agentd_client.v1).

The generated code lives in the client package because the thin client needs it
and must not import the daemon; the daemon imports it from there. `--check`
exits 1 when the committed code differs from what the protos generate.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
OUT_DIR = ROOT / "client" / "agentd_client" / "v1"


def generate(into: Path) -> dict[str, str]:
    protos = sorted(
        str(p.relative_to(PROTO_DIR)) for p in (PROTO_DIR / "agentd" / "v1").glob("*.proto")
    )
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={into}",
        f"--pyi_out={into}",
        f"--grpc_python_out={into}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    files: dict[str, str] = {}
    for path in sorted((into / "agentd" / "v1").iterdir()):
        text = path.read_text()
        # protoc writes imports for the proto package path; the code lives in agentd_client.v1.
        text = re.sub(r"^from agentd\.v1 import", "from agentd_client.v1 import", text, flags=re.M)
        files[path.name] = text
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the generated code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp))
    if args.check:
        stale = [
            name
            for name, text in files.items()
            if not (OUT_DIR / name).exists() or (OUT_DIR / name).read_text() != text
        ]
        if stale:
            print(f"stale generated code: {', '.join(stale)}; run `make proto`", file=sys.stderr)
            return 1
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT_DIR / name).write_text(text)
    init = OUT_DIR / "__init__.py"
    if not init.exists():
        init.write_text(
            '"""Code generated from protos/agentd/v1 by `make proto`; do not edit."""\n'
        )
    print(f"generated {len(files)} files into {OUT_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
