# SPDX-License-Identifier: MIT
#
# A gdb (or cuda-gdb) script for a closed library that stops making progress
# under openmps: it logs every symbol the library looks up with dlsym (and
# whether it was found), the driver functions it calls, and the first time
# it sleeps (usleep, nanosleep); when it has slept SLEEPS times it prints a backtrace and the
# code around the sleep's caller, and ends the program.
#
#   GDB_WAITS_FROM=libnvcuvid GDB_WAITS_SLEEPS=20000 \
#       cuda-gdb -batch -x tools/gdb-waits.py --args PROGRAM ARGS...
#
# GDB_WAITS_FROM: part of the looking-up or calling library's file name
# (default: any library); GDB_WAITS_SLEEPS: sleeps before it stops (default
# 20000); GDB_WAITS_CALLS: driver functions to watch, separated by commas
# (default a few that libraries call first). Run it under openmps and on
# the real driver, and compare: the last lookup or call before the program
# parts ways is where to look. Found this way: libnvcuvid (under nvJPEG)
# looks up cuGLGetDevices_v2 and, when it is missing, takes a lock it
# already holds, sleeping in usleep(0) for ever.

import os

import gdb

FROM = os.environ.get("GDB_WAITS_FROM", "")
SLEEPS = int(os.environ.get("GDB_WAITS_SLEEPS", "20000"))
CALLS = [c for c in os.environ.get("GDB_WAITS_CALLS",
                                   "cuInit,cuDriverGetVersion,cuDeviceGetCount,cuCtxGetCurrent,"
                                   "cuCtxPushCurrent_v2,cuGetExportTable,cuGetProcAddress_v2").split(",") if c]


def caller_lib():
    """The file of the library that called the current function, or ''."""
    frame = gdb.newest_frame().older()
    return (gdb.solib_name(frame.pc()) or "") if frame else ""


def wanted():
    return not FROM or FROM in caller_lib()


class Looked(gdb.FinishBreakpoint):
    """dlsym's return: found or not."""

    def __init__(self, name):
        super().__init__(gdb.newest_frame(), internal=True)
        self.name = name

    def stop(self):
        value = int(gdb.parse_and_eval("$rax"))
        print("gdb-waits: dlsym %s -> %s" % (self.name, hex(value) if value else "NULL"))
        return False

    def out_of_scope(self):
        pass


class Dlsym(gdb.Breakpoint):
    def stop(self):
        if wanted():
            try:
                name = gdb.parse_and_eval("(const char *)$rsi").string()
            except gdb.error:
                name = "?"
            Looked(name)
        return False


class Call(gdb.Breakpoint):
    def stop(self):
        if wanted():
            print("gdb-waits: %s called from %s" % (self.location, caller_lib() or "the program"))
        return False


class Sleep(gdb.Breakpoint):
    count = 0

    def stop(self):
        if not wanted():
            return False
        Sleep.count += 1
        if Sleep.count == 1:
            print("gdb-waits: first %s, from %s" % (self.location, caller_lib() or "the program"))
        if Sleep.count < SLEEPS:
            return False
        print("gdb-waits: %d sleeps: the program waits; where:" % Sleep.count)
        gdb.execute("bt 12")
        gdb.execute("frame 1")
        gdb.execute("x/48i $pc-0x90")
        return True


gdb.execute("set pagination off")
gdb.execute("set breakpoint pending on")
Dlsym("dlsym")
for fn in CALLS:
    Call(fn)
for fn in ("usleep", "nanosleep"):
    Sleep(fn)
gdb.execute("run")
if Sleep.count >= SLEEPS:
    gdb.execute("kill")
