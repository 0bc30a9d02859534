#!/usr/bin/env python3
"""Make an sm_90-only copy of Transformer Engine's core wheel (transformer_engine_cu13) small enough to carry.

The core wheel is ~264 MiB, of which ~250 MiB are CUDA fat binaries for sm_75 ... sm_120 inside
libtransformer_engine.so; the device tool carries at most 64 MiB per call and a machine starts bare. This keeps every
ELF header and every fat-binary entry header in place and only overwrites the payload of the entries for other
architectures with zeros (the file keeps its size and layout, so every offset the loader reads is unchanged): the
CUDA driver picks the sm_90 cubin on an H200 and never reads the others, and runs of zeros deflate to almost
nothing. RECORD is rewritten with the new hashes. Usage:

    python3 bench/tools/te_prune_core.py IN.whl OUT_DIR [--keep 90]

Prints a table of the architectures found (entries and bytes) and the sizes before/after.
"""
import argparse
import base64
import collections
import hashlib
import os
import struct
import sys
import zipfile

FATBIN_MAGIC = 0xBA55ED50
KIND_NAMES = {1: "ptx", 2: "elf"}


def fatbin_entries(data):
    """Yield (payload_offset, payload_size, kind, arch) for each entry of each fat binary found in data."""
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = data.find(magic)
    while pos >= 0:
        _version, header_size, fat_size = struct.unpack_from("<HHQ", data, pos + 4)
        if header_size != 16 or pos + 16 + fat_size > len(data):
            pos = data.find(magic, pos + 4)
            continue
        entry, end = pos + header_size, pos + header_size + fat_size
        while entry + 32 <= end:
            kind, _unk, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            if entry_header < 32 or payload == 0 and entry_header == 0:
                break
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            yield entry + entry_header, payload, kind, arch
            entry += entry_header + payload
        pos = data.find(magic, end)


def prune(data, keep):
    """Zero the payloads of entries whose arch is not in keep. Returns (new bytes, per-(kind,arch) stats)."""
    buf = bytearray(data)
    stats = collections.Counter()
    counts = collections.Counter()
    for offset, size, kind, arch in fatbin_entries(data):
        key = (KIND_NAMES.get(kind, str(kind)), arch)
        stats[key] += size
        counts[key] += 1
        if arch not in keep:
            buf[offset:offset + size] = bytes(size)
    return bytes(buf), stats, counts


def record_line(name, payload):
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(payload)}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel")
    ap.add_argument("out_dir")
    ap.add_argument("--keep", default="90", help="comma-separated SM numbers whose cubins stay (default 90)")
    args = ap.parse_args(argv)
    keep = {int(x) for x in args.keep.split(",")}
    os.makedirs(args.out_dir, exist_ok=True)
    out_path = os.path.join(args.out_dir, os.path.basename(args.wheel))
    records = []
    with zipfile.ZipFile(args.wheel) as zin, zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        record_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
        for info in zin.infolist():
            if info.filename == record_name:
                continue
            payload = zin.read(info.filename)
            if info.filename.endswith(".so"):
                pruned, stats, counts = prune(payload, keep)
                if stats:
                    print(f"{info.filename}: {len(stats)} (kind, sm) groups")
                    for (kind, arch), size in sorted(stats.items(), key=lambda kv: kv[0][1]):
                        mark = "kept" if arch in keep else "zeroed"
                        print(f"  {kind} sm_{arch}: {counts[(kind, arch)]} entries, {size / 2**20:.1f} MiB, {mark}")
                payload = pruned
            zout.writestr(info, payload)
            records.append(record_line(info.filename, payload))
        records.append(f"{record_name},,")
        zout.writestr(zin.getinfo(record_name), "\n".join(records) + "\n")
    before, after = os.path.getsize(args.wheel), os.path.getsize(out_path)
    print(f"{os.path.basename(args.wheel)}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB ({out_path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
