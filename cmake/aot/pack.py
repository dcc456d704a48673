"""Read and write gnnsparse kernel packs (the format of sycl/kernel_store.hpp).

    python cmake/aot/pack.py list  PACK                 # key, kernel entry point, bytes
    python cmake/aot/pack.py split PACK DIR             # DIR/<key>.spv and DIR/<key>.name per instance
    python cmake/aot/pack.py join  OUT DIR SOURCE_HASH  # a pack of DIR/<key>.bin (device binaries)

A pack: "GNNSPV01" (SPIR-V) or "GNNBIN01" (device binaries) | u64 source hash | u32 count |
count records (u64 key, u32 name offset, u32 name length, u64 blob offset, u64 blob length,
u64 FNV-1a of the blob) | names | blobs. Little-endian.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

RECORD = struct.Struct("<QIIQQQ")
HEAD = struct.Struct("<8sQI")


def fnv1a(b: bytes) -> int:
    h = 1469598103934665603
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def read(path):
    data = Path(path).read_bytes()
    magic, shash, count = HEAD.unpack_from(data, 0)
    out = []
    for i in range(count):
        key, noff, nlen, boff, blen, bhash = RECORD.unpack_from(data, HEAD.size + RECORD.size * i)
        out.append((key, data[noff:noff + nlen].decode(), data[boff:boff + blen]))
    return magic, shash, out


def write(path, magic: bytes, shash: int, items):
    """items: (key, name, blob) triples."""
    off = HEAD.size + RECORD.size * len(items)
    names, recs = b"", []
    for key, name, blob in items:
        names += name.encode()
    blob_off = off + len(names)
    noff = off
    for key, name, blob in items:
        recs.append(RECORD.pack(key, noff, len(name.encode()), blob_off, len(blob), fnv1a(blob)))
        noff += len(name.encode())
        blob_off += len(blob)
    Path(path).write_bytes(HEAD.pack(magic, shash, len(items)) + b"".join(recs) + names
                           + b"".join(b for _, _, b in items))


def main(argv):
    cmd = argv[1]
    if cmd == "list":
        magic, shash, items = read(argv[2])
        print(f"{magic.decode()} source {shash:016x}, {len(items)} instances")
        for key, name, blob in items:
            print(f"{key:016x} {name} {len(blob)}")
    elif cmd == "split":
        magic, shash, items = read(argv[2])
        d = Path(argv[3])
        d.mkdir(parents=True, exist_ok=True)
        for key, name, blob in items:
            (d / f"{key:016x}.spv").write_bytes(blob)
            (d / f"{key:016x}.name").write_text(name)
        (d / "source_hash").write_text(f"{shash}")
    elif cmd == "join":
        d = Path(argv[3])
        items = [(int(p.stem, 16), (d / f"{p.stem}.name").read_text(), p.read_bytes()) for p in sorted(d.glob("*.bin"))]
        write(argv[2], b"GNNBIN01", int(argv[4]), items)
        print(f"{argv[2]}: {len(items)} device binaries")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
