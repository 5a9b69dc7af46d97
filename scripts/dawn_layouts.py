#!/usr/bin/env python3
"""dawn_layouts.py — the webgpu.h struct layouts of the Dawn library lean loads, as test data.

    python3 scripts/dawn_layouts.py [LIB] > tests/data/dawn-layouts.txt

LIB defaults to build/webgpu/libwebgpu_wrapper.so (scripts/setup_webgpu.sh installs it: npm
bun-webgpu-linux-x64, pinned). The library carries DWARF describing the structs it was built
against; llvm-dwarfdump (LLVM 14, .ci/run installs it) prints them and this keeps the WGPU ones:

    struct NAME SIZE            a struct's size in bytes (hex)
    field NAME MEMBER OFFSET    a member's offset (hex)

tests/test_gpu_device.c holds src/gpu/webgpu.h's declarations to these numbers: a new Dawn
whose structs moved shows up as a diff of this file, then as failures there.
"""
import re
import subprocess
import sys


def main():
    lib = sys.argv[1] if len(sys.argv) > 1 else "build/webgpu/libwebgpu_wrapper.so"
    dump = subprocess.run(["llvm-dwarfdump", "--debug-info", lib], check=True, capture_output=True,
                          text=True).stdout
    out, seen, cur = [], set(), None
    # Each DIE: its tag line, then indented attribute lines, then a blank line.
    for die in re.split(r"\n\s*\n", dump):
        tag = re.search(r"DW_TAG_(\w+)", die)
        name = re.search(r'DW_AT_name\s+\("([^"]*)"\)', die)
        if not tag:
            continue
        if tag.group(1) == "structure_type":
            size = re.search(r"DW_AT_byte_size\s+\((0x[0-9a-f]+)\)", die)
            n = name and re.fullmatch(r"cimport\.struct_(WGPU\w+)", name.group(1))
            cur = n.group(1) if n and size and n.group(1) not in seen else None
            if cur:
                seen.add(cur)
                out.append(f"struct {cur} {int(size.group(1), 16):#x}")
        elif tag.group(1) == "member" and cur and name:
            off = re.search(r"DW_AT_data_member_location\s+\((0x[0-9a-f]+)\)", die)
            if off:
                out.append(f"field {cur} {name.group(1)} {int(off.group(1), 16):#x}")
        elif tag.group(1) not in ("member",):
            cur = None
    print(f"# webgpu.h struct layouts of {lib.split('/')[-1]} (npm bun-webgpu-linux-x64@0.1.7, x86-64), "
          "from its DWARF; made by scripts/dawn_layouts.py")
    print("\n".join(out))


if __name__ == "__main__":
    main()
