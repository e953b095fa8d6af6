"""Extract the GDN entry points' signatures from unpacked FlashInfer wheels into tests/data/flashinfer-signatures.json,
which tests/targets/test_flashinfer_releases.py checks the adapters and the stand-ins against (every release, on any
machine).
Run it when a release appears:

    pip download --no-deps flashinfer-python==X; unzip it into WHEELS/X (docs/research/flashinfer-releases.md)
    python scripts/flashinfer_signatures.py WHEELS > tests/data/flashinfer-signatures.json

Each function becomes a stub `def name(<its parameters and defaults, annotations dropped>): pass`; a release also
records whether it has the C++ prefill's JIT module (flashinfer/jit/gdn.py).
"""

import ast
import json
import sys
from pathlib import Path

FILES = {
    "gdn_decode.py": ("gated_delta_rule_decode_pretranspose", "gated_delta_rule_mtp", "gated_delta_rule_decode"),
    "gdn_prefill.py": ("chunk_gated_delta_rule",),
}


def stubs(package: Path) -> dict[str, str]:
    out = {}
    for filename, names in FILES.items():
        for node in ast.parse((package / filename).read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                node.decorator_list, node.returns, node.body = [], None, [ast.Pass()]
                for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                    arg.annotation = None
                out[node.name] = ast.unparse(node)
    return out


def release_key(version: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in version.replace(".post", ".").split("."))


def main(wheels: Path) -> None:
    releases = sorted((p.name for p in wheels.iterdir() if (p / "flashinfer/gdn_decode.py").is_file()), key=release_key)
    data = {
        r: {"jit_prefill": (wheels / r / "flashinfer/jit/gdn.py").is_file(), "stubs": stubs(wheels / r / "flashinfer")}
        for r in releases
    }
    json.dump(data, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
