#!/usr/bin/env python3
"""A monitor written apart from the agent, from docs/driver-interface.md section 9 alone.

Usage: py_monitor.py NODE

Stats the device node NODE (a character device, or it says why not), opens it read-only, lists
the processes attached to it (GET_ALL_APPS_INFO), finds the first other one that owns a datastore
(ACQUIRE_NEURON_DS with its PID) and maps that datastore with Python's mmap module, which checks
st_size only for regular files. Prints one "key: value" line per step and exits 0 when the
mapped datastore starts with the 'nds' signature, 1 otherwise. Uses the standard library only.
"""

import fcntl
import mmap
import os
import stat
import struct
import sys

# Request values: dir << 30 | size << 16 | 'N' << 8 | nr, the size being a pointer's (8).
GET_ALL_APPS_INFO = 0x80084E07
ACQUIRE_NEURON_DS = 0x80084E47
APPS_FLAGS_ALL = 0xF
APP_INFO_SIZE = 152  # struct neuron_app_info
MAX_PROCESSES = 16
APPS_HEADER = "<HxxIIxxxx"  # flags u16, pad, capacity u32, size u32, pad: 16 bytes
DS_INFO = "<ixxxxQIxxxx"  # pid s32, pad, mmap_offset u64, size u32, pad: 24 bytes


def list_pids(fd):
    buf = bytearray(struct.pack(APPS_HEADER, APPS_FLAGS_ALL, MAX_PROCESSES, 0))
    buf += bytes(MAX_PROCESSES * APP_INFO_SIZE)
    fcntl.ioctl(fd, GET_ALL_APPS_INFO, buf, True)
    _, _, size = struct.unpack_from(APPS_HEADER, buf)
    return [struct.unpack_from("<i", buf, 16 + i * APP_INFO_SIZE)[0] for i in range(size)]


def acquire(fd, pid):
    """The datastore's (mmap offset, size) for pid, or None when it has none."""
    info = bytearray(struct.pack(DS_INFO, pid, 0, 0))
    try:
        fcntl.ioctl(fd, ACQUIRE_NEURON_DS, info, True)
    except OSError:
        return None
    _, offset, size = struct.unpack(DS_INFO, info)
    return offset, size


def main():
    node = sys.argv[1]
    st = os.stat(node)
    kind = "character device" if stat.S_ISCHR(st.st_mode) else "not a character device"
    print(f"stat: {kind} {os.major(st.st_rdev)}:{os.minor(st.st_rdev)} size {st.st_size}")
    if not stat.S_ISCHR(st.st_mode):
        return 1
    fd = os.open(node, os.O_RDONLY)
    pids = list_pids(fd)
    print("apps: " + " ".join(str(p) for p in pids))
    for pid in pids:
        if pid == os.getpid():
            continue
        found = acquire(fd, pid)
        if found is None:
            continue
        offset, size = found
        print(f"datastore: pid {pid} offset {offset:#x} size {size}")
        data = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ, offset=offset)
        signature = data[:4]
        print(f"signature: {signature!r}")
        data.close()
        return 0 if signature == b"nds\0" else 1
    print("datastore: none")
    return 1


if __name__ == "__main__":
    sys.exit(main())
