"""Stands in for compute-sanitizer on a CPU host: runs the program after the six option words and passes its
output through; when a case with a padded row starts, it prints a memcheck-style error and ends the program,
as a real memcheck error ends the CUDA context."""

import json
import subprocess
import sys

program = sys.argv[7:]
coordinates = json.load(open(program[5]))  # python -m fuzz.run.sanitize --child TARGET FILE DEVICE OVERRIDES
child = subprocess.Popen(program, stdout=subprocess.PIPE, text=True)
for line in child.stdout:
    print(line, end="", flush=True)
    if line.startswith("@@gdn-case") and "-pad0-" not in coordinates[int(line.split()[1])]:
        child.kill()
        print(
            "========= Invalid __global__ write of size 4 bytes\n=========     at gdn_kernel+0x40\n"
            "========= ERROR SUMMARY: 1 error",
            flush=True,
        )
        break
child.wait()
