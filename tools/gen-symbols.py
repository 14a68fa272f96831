#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# Generates the client library's symbol tables from the CUDA toolkit:
#
#   src/client/gen/symbols.h        enum mps_sym (one value per exported function, sorted by name),
#                                   the names array and the cuGetProcAddress table declarations
#   src/client/gen/symbols.c        mps__sym_names[]
#   src/client/gen/stubs.S          one x86-64 stub per exported function: it loads its index and
#                                   jumps through mps__dispatch[index]
#   src/client/gen/procaddr_table.c what the real driver's cuGetProcAddress resolves, per API name
#
# The exported set is the defined text symbols of the toolkit's stub libcuda.so, and the graphics
# interop functions the real driver exports besides (see INTEROP_HEADERS below). The
# cuGetProcAddress table comes from the PFN_<name>_v<version>[_ptsz|_ptds] typedefs of the
# *Typedefs.h headers, mapped onto the exported symbols by these rules:
#
#   1. Each PFN_<name>_v<ver> typedef (no suffix) is one ABI generation of <name>. Sorted by
#      version, the generations are the exported symbols <name>, <name>_v2, <name>_v3, ... in
#      that order; a name whose generation count differs from its exported symbols is left out.
#   2. A PFN_<name>_v<ver>_ptsz (or _ptds) typedef is the per-thread default stream twin of the
#      generation current at <ver>: that generation's symbol plus the suffix.
#   3. cuda.h's "#define <name> <symbol>" and "#define <name> __CUDA_API_PTSZ(<symbol>)" lines
#      cross-check rules 1 and 2 on the newest generation; a per-thread twin that disagrees
#      stops the generator. cuda.h may bind direct calls elsewhere than the lookup goes, and
#      that is reported, not used: cuGraphInstantiate is defined as another function,
#      cuGraphInstantiateWithFlags, and cuStreamGetCtx stays on its first generation in
#      source while the lookup moves to cuStreamGetCtx_v2 (the driver agrees with the typedefs).
#   4. Typedefs inside "#ifdef _WIN32" describe Windows-only functions and are skipped; other
#      names the stub library does not export are left out.
#
# The stub library lacks the GL, EGL and VDPAU interop functions, which the real driver exports
# and which libraries look up by name: NVIDIA's video library (libnvcuvid, under nvJPEG) takes
# cuGLGetDevices_v2 and its siblings with dlsym and stops for good when one is missing. Their
# symbols are derived from the interop headers' typedefs by rules 1 and 2 (name, name_v2, ...
# by generation; a per-thread twin is its generation's symbol plus the suffix), which gives the
# names the real driver exports; they are exported like the rest, and the client answers them
# as any function it does not implement (the real driver's in pass-through).
#
# The build does not run this script; `make regen-symbols` does, and its outputs are committed.
# Same inputs give byte-identical outputs. Python 3 standard library only.

import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

TYPEDEF_HEADERS = [
    "cudaTypedefs.h",
    "cudaProfilerTypedefs.h",
    "cudaGLTypedefs.h",
    "cudaEGLTypedefs.h",
    "cudaVDPAUTypedefs.h",
]

# Headers whose typedefs name exported functions the stub library lacks ...
INTEROP_HEADERS = [
    "cudaGLTypedefs.h",
    "cudaEGLTypedefs.h",
    "cudaVDPAUTypedefs.h",
]
# ... but for these, which the real driver (580) does not export either.
INTEROP_NOT_EXPORTED = {"cuEventCreateFromEGLSync"}

PFN_RE = re.compile(r"\bPFN_(\w+?)_v(\d+)(_ptsz|_ptds)?\)")
DEFINE_RE = re.compile(
    r"^\s*#\s*define\s+(cu\w+)\s+"
    r"(?:__CUDA_API_(PTDS|PTSZ)\(\s*(\w+)\s*\)|(cu\w+))\s*$")
CUDA_VERSION_RE = re.compile(r"^#define\s+CUDA_VERSION\s+(\d+)\s*$", re.M)

NO_SYM = None


def fail(msg):
    sys.exit("gen-symbols: " + msg)


def read_exports(stub):
    """The defined text symbols of the stub library, sorted by name (strcmp order)."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", stub], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail("nm -D %s: %s" % (stub, e))
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] == "T":
            names.add(fields[2])
    if not names:
        fail("no exported functions in " + stub)
    return sorted(names)


def active_lines(text):
    """Yields the lines of a header outside '#ifdef _WIN32' blocks (and inside their #else).
    Every other conditional is taken as true: the typedef headers put the older generations
    under __CUDA_API_VERSION_INTERNAL, and those are generations the driver still resolves."""
    stack = []  # one bool per open conditional: is this branch Windows-only?
    for line in text.splitlines():
        directive = re.match(r"\s*#\s*(\w+)(.*)", line)
        if directive:
            word, rest = directive.group(1), directive.group(2)
            if word in ("if", "ifdef", "ifndef"):
                win = (word == "ifdef" and rest.strip() == "_WIN32") or \
                      (word == "if" and re.fullmatch(r"\s*defined\s*\(?\s*_WIN32\s*\)?\s*", rest) is not None)
                stack.append(win)
                continue
            if word in ("else", "elif") and stack:
                stack[-1] = False
                continue
            if word == "endif" and stack:
                stack.pop()
                continue
        if not any(stack):
            yield line


def read_typedefs(include, headers=TYPEDEF_HEADERS):
    """{api name: {"legacy": set(versions), "ptds": {version: suffix}}} from the PFN typedefs."""
    apis = defaultdict(lambda: {"legacy": set(), "ptds": {}})
    for header in headers:
        path = os.path.join(include, header)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = "\n".join(active_lines(f.read()))
        except OSError as e:
            fail("%s: %s" % (path, e))
        for m in PFN_RE.finditer(text):
            name, version, suffix = m.group(1), int(m.group(2)), m.group(3)
            if suffix:
                apis[name]["ptds"][version] = suffix
            else:
                apis[name]["legacy"].add(version)
    return apis


def read_cuda_h(include):
    """(CUDA_VERSION, {api name: (symbol, per-thread suffix or None)}) from cuda.h."""
    path = os.path.join(include, "cuda.h")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        fail("%s: %s" % (path, e))
    m = CUDA_VERSION_RE.search(text)
    if not m:
        fail("no CUDA_VERSION in " + path)
    defines = {}
    for line in text.splitlines():
        d = DEFINE_RE.match(line)
        if not d:
            continue
        name = d.group(1)
        if d.group(3):
            target = (d.group(3), "_" + d.group(2).lower())
        else:
            target = (d.group(4), None)
        # Both branches of cuda.h's per-thread #if are read: they define different names.
        defines.setdefault(name, target)
    return int(m.group(1)), defines


def interop_exports(include, exports):
    """The symbols of the interop headers' functions the stub library does not export, by
    rules 1 and 2: one per typedef generation, and each per-thread twin."""
    have = set(exports)
    extra = set()
    for name, api in read_typedefs(include, INTEROP_HEADERS).items():
        if name in have or name in INTEROP_NOT_EXPORTED:
            continue
        legacy = sorted(api["legacy"])
        gens = [name] + ["%s_v%d" % (name, n) for n in range(2, len(legacy) + 1)]
        extra.update(gens)
        for v, suffix in api["ptds"].items():
            current = [sym for lv, sym in zip(legacy, gens) if lv <= v]
            if current:
                extra.add(current[-1] + suffix)
    return sorted(extra)


def generation_symbols(name, exports):
    """The exported ABI generations of name: name, name_v2, name_v3, ... while they exist."""
    gens = [name] if name in exports else []
    n = 2
    while "%s_v%d" % (name, n) in exports:
        gens.append("%s_v%d" % (name, n))
        n += 1
    return gens


def build_procaddr(apis, defines, exports):
    """Returns (table, notes): table is [(name, [(version, symbol, ptds symbol or NO_SYM)])]
    sorted by name; notes lists what was left out or ignored, one line each."""
    exported = set(exports)
    table, notes = [], []
    for name in sorted(apis):
        legacy = sorted(apis[name]["legacy"])
        ptds = apis[name]["ptds"]
        gens = generation_symbols(name, exported)
        if not gens:
            notes.append("%s: not exported by the stub library; left out" % name)
            continue
        if len(gens) != len(legacy):
            notes.append("%s: %d typedef generations %s but %d exported symbols %s; left out"
                         % (name, len(legacy), legacy, len(gens), gens))
            continue
        gen_at = list(zip(legacy, gens))  # rule 1

        def current(version):
            syms = [sym for v, sym in gen_at if v <= version]
            return syms[-1] if syms else None

        twins = {}  # ptds typedef version -> (legacy symbol, ptds symbol); rule 2
        for v in sorted(ptds):
            base = current(v)
            if base is None or base + ptds[v] not in exported:
                notes.append("%s: per-thread typedef v%d%s has no exported symbol; ignored"
                             % (name, v, ptds[v]))
                continue
            twins[v] = (base, base + ptds[v])

        variants = []
        for v in sorted(set(legacy) | set(twins)):
            sym = current(v)
            twin_versions = [t for t in twins if t <= v]
            twin = NO_SYM
            if twin_versions and twins[max(twin_versions)][0] == sym:
                twin = twins[max(twin_versions)][1]
            if variants and variants[-1][1:] == (sym, twin):
                continue
            variants.append((v, sym, twin))

        if name in defines:  # rule 3
            target, suffix = defines[name]
            newest = variants[-1]
            if target not in gens:
                notes.append("%s: cuda.h defines it as %s, another function; the lookup keeps %s"
                             % (name, target, newest[1]))
            elif target != newest[1]:
                notes.append("%s: cuda.h binds direct calls to %s; the lookup gives %s from v%d"
                             % (name, target, newest[1], newest[0]))
            elif suffix and newest[2] != target + suffix:
                fail("%s: cuda.h says %s%s is the per-thread twin, the typedefs say %s"
                     % (name, target, suffix, newest[2]))
        table.append((name, variants))
    return table, notes


HEADER_NOTE = """\
// Generated by tools/gen-symbols.py from the CUDA %d toolkit (the stub libcuda.so and the
// *Typedefs.h headers); do not edit, run `make regen-symbols`.
"""


def c_file_header(cuda_version, what):
    return "// SPDX-License-Identifier: MIT\n//\n" + what + "//\n" + HEADER_NOTE % cuda_version + "\n"


def gen_symbols_h(exports, table, cuda_version):
    nvariants = sum(len(v) for _, v in table)
    out = [c_file_header(cuda_version, """\
// The client library's exported driver functions and its cuGetProcAddress table.
// enum mps_sym numbers every function libcuda exports, in strcmp order of the names; the asm
// stubs (stubs.S) jump through mps__dispatch[MPS_SYM_x], and mps__sym_names[] gives the names.
//
// mps__procaddr_names[] (sorted by name, for bsearch) holds each API name a program passes to
// cuGetProcAddress; its variants are mps__procaddr_variants[first .. first + count), in rising
// version order: from CUDA version `version` on, the name resolves to `sym`, or to `ptds_sym`
// when the per-thread default stream variant is asked for (MPS_NO_SYM: there is none).
""")]
    out.append("#ifndef MPS_CLIENT_GEN_SYMBOLS_H\n#define MPS_CLIENT_GEN_SYMBOLS_H\n\n")
    out.append("#include <stdint.h>\n\n")
    out.append("#define MPS_SYMBOLS_CUDA_VERSION %d\n\n" % cuda_version)
    out.append("enum mps_sym {\n")
    for name in exports:
        out.append("\tMPS_SYM_%s,\n" % name)
    out.append("\tMPS_NSYMS\n};\n\n")
    out.append("#define MPS_NO_SYM 0xffff\n\n")
    out.append("extern const char *const mps__sym_names[MPS_NSYMS];\n\n")
    out.append("struct mps_procaddr_variant {\n"
               "\tint32_t version;\t/* first CUDA version that gets this variant */\n"
               "\tuint16_t sym;\t\t/* enum mps_sym: legacy default stream */\n"
               "\tuint16_t ptds_sym;\t/* enum mps_sym: per-thread default stream, or MPS_NO_SYM */\n"
               "};\n\n")
    out.append("struct mps_procaddr_name {\n"
               "\tconst char *name;\n"
               "\tuint16_t first;\t\t/* index into mps__procaddr_variants */\n"
               "\tuint16_t count;\n"
               "};\n\n")
    out.append("#define MPS_PROCADDR_NNAMES %d\n" % len(table))
    out.append("#define MPS_PROCADDR_NVARIANTS %d\n\n" % nvariants)
    out.append("extern const struct mps_procaddr_name mps__procaddr_names[MPS_PROCADDR_NNAMES];\n")
    out.append("extern const struct mps_procaddr_variant mps__procaddr_variants[MPS_PROCADDR_NVARIANTS];\n\n")
    out.append("#endif\n")
    return "".join(out)


def gen_symbols_c(exports, cuda_version):
    out = [c_file_header(cuda_version, "// The names of the exported driver functions, indexed by enum mps_sym.\n")]
    out.append('#include "client/gen/symbols.h"\n\n')
    out.append("const char *const mps__sym_names[MPS_NSYMS] = {\n")
    for name in exports:
        out.append('\t[MPS_SYM_%s] = "%s",\n' % (name, name))
    out.append("};\n")
    return "".join(out)


def gen_stubs_s(exports, cuda_version):
    out = [c_file_header(cuda_version, """\
// One entry point per exported driver function (x86-64, System V). Each stub puts its
// enum mps_sym index in %eax and jumps through mps__dispatch[index] with every argument
// register and the stack untouched, so the target sees the caller's call exactly. %r11 is
// the scratch register the ABI leaves free at a call; %rax carries no argument for these
// non-variadic functions.
""")]
    out.append("\t.text\n\t.hidden mps__dispatch\n")
    for i, name in enumerate(exports):
        out.append("\n\t.globl %s\n\t.type %s,@function\n\t.p2align 4\n%s:\n" % (name, name, name))
        out.append("\tmovl $%d, %%eax\n" % i)
        out.append("\tleaq mps__dispatch(%rip), %r11\n")
        out.append("\tjmp *(%r11,%rax,8)\n")
        out.append("\t.size %s, .-%s\n" % (name, name))
    out.append('\n\t.section .note.GNU-stack,"",@progbits\n')
    return "".join(out)


def gen_procaddr_c(table, notes, cuda_version):
    out = [c_file_header(cuda_version, """\
// What the real driver's cuGetProcAddress resolves: for each API name, the variants by CUDA
// version (see symbols.h for the layout and tools/gen-symbols.py for how they are derived).
""")]
    if notes:
        out.append("// Described by the headers but not in this table:\n")
        for note in notes:
            out.append("//   %s\n" % note)
        out.append("\n")
    out.append('#include "client/gen/symbols.h"\n\n')

    def sym(s):
        return "MPS_NO_SYM" if s is NO_SYM else "MPS_SYM_" + s

    out.append("const struct mps_procaddr_variant mps__procaddr_variants[MPS_PROCADDR_NVARIANTS] = {\n")
    for name, variants in table:
        out.append("\t/* %s */\n" % name)
        for v, s, t in variants:
            out.append("\t{ %d, %s, %s },\n" % (v, sym(s), sym(t)))
    out.append("};\n\n")
    out.append("const struct mps_procaddr_name mps__procaddr_names[MPS_PROCADDR_NNAMES] = {\n")
    first = 0
    for name, variants in table:
        out.append('\t{ "%s", %d, %d },\n' % (name, first, len(variants)))
        first += len(variants)
    out.append("};\n")
    return "".join(out)


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except OSError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return True


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description="Generate the client library symbol tables.")
    ap.add_argument("--cuda-home", default=os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    ap.add_argument("--stub", help="stub library (default: CUDA_HOME/lib64/stubs/libcuda.so)")
    ap.add_argument("--out", default=os.path.join(root, "src", "client", "gen"))
    args = ap.parse_args()
    include = os.path.join(args.cuda_home, "include")
    stub = args.stub or os.path.join(args.cuda_home, "lib64", "stubs", "libcuda.so")

    exports = read_exports(stub)
    interop = interop_exports(include, exports)
    exports = sorted(set(exports) | set(interop))
    if len(exports) >= 0xffff:
        fail("%d exports do not fit the 16-bit indices" % len(exports))
    apis = read_typedefs(include)
    cuda_version, defines = read_cuda_h(include)
    table, notes = build_procaddr(apis, defines, exports)

    reachable = {s for _, variants in table for _, a, b in variants for s in (a, b) if s}
    for name in exports:
        if name not in reachable:
            notes.append("exported %s: no cuGetProcAddress name resolves to it" % name)

    os.makedirs(args.out, exist_ok=True)
    outputs = {
        "symbols.h": gen_symbols_h(exports, table, cuda_version),
        "symbols.c": gen_symbols_c(exports, cuda_version),
        "stubs.S": gen_stubs_s(exports, cuda_version),
        "procaddr_table.c": gen_procaddr_c(table, notes, cuda_version),
    }
    for fname in sorted(outputs):
        changed = write_if_changed(os.path.join(args.out, fname), outputs[fname])
        print("gen-symbols: %s %s" % (fname, "written" if changed else "unchanged"))
    nvariants = sum(len(v) for _, v in table)
    print("gen-symbols: CUDA %d: %d exported functions (%d of them interop), %d cuGetProcAddress names, "
          "%d variants" % (cuda_version, len(exports), len(interop), len(table), nvariants))
    for note in notes:
        print("gen-symbols: note: " + note)


if __name__ == "__main__":
    main()
