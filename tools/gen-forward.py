#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# Generates the forwarding layer: for each driver function listed in
# src/common/forward.def, the wire message, the client function that packs
# its arguments and the server handler that unpacks them, translates handles
# and calls the driver (or a hand-written hook).
#
#   src/common/gen/forward_wire.h   MPS_FWD_OPS(X) (one op per function, part of
#                                   wire.h's op list) and the message and reply layouts
#   src/client/gen/forward.c        mps__fwd_<symbol>(): the client side, with the
#                                   exact prototype of the symbol; mps__forward_api[]
#   src/server/gen/forward.c        mps__op_fwd_<symbol>(): the server side
#   src/server/gen/forward_driver.h MPS_DRIVER_FWD(X): the driver functions called
#
# Prototypes come from cuda.h as the C preprocessor sees it (so versioned names
# such as cuGraphAddDependencies_v2 carry their own parameter lists), read with
# `cc -E`. Each argument's role is inferred from its type and may be given in
# forward.def (see the head of that file). Same inputs give byte-identical
# outputs; `make regen-forward` runs this, and the outputs are committed.

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Handle kinds: C type -> (kind name, server handle type, how the client names it).
#   obj:    the client's handle is a struct of ours with a magic number
#   int:    the handle is an integer, the server's handle itself
KINDS = {
    "CUcontext":    ("CTX", "MPS_H_CTX", "obj"),
    "CUstream":     ("STREAM", "MPS_H_STREAM", "obj"),
    "CUevent":      ("EVENT", "MPS_H_EVENT", "obj"),
    "CUfunction":   ("FUNC", "MPS_H_FUNC", "obj"),
    "CUmodule":     ("MODULE", "MPS_H_MODULE", "obj"),
    "CUlibrary":    ("LIBRARY", "MPS_H_MODULE", "obj"),
    "CUgraph":      ("GRAPH", "MPS_H_GRAPH", "obj"),
    "CUgraphNode":  ("NODE", "MPS_H_NODE", "obj"),
    "CUgraphExec":  ("EXEC", "MPS_H_EXEC", "obj"),
    "CUmemoryPool": ("POOL", "MPS_H_POOL", "obj"),
    "CUuserObject": ("USEROBJ", "MPS_H_USEROBJ", "obj"),
    "CUarray":      ("ARRAY", "MPS_H_ARRAY", "obj"),
    "CUmipmappedArray": ("MIPMAP", "MPS_H_MIPMAP", "obj"),
    "CUmemGenericAllocationHandle": ("ALLOC", "MPS_H_ALLOC", "int"),
    "CUdevice":     ("DEVICE", None, "int"),
}
KIND_TYPE = {v[0]: k for k, v in KINDS.items()}
# Kinds whose objects the forwarding layer creates and frees (server/objects.c).
GENERIC = {"GRAPH", "NODE", "EXEC", "POOL", "USEROBJ", "ALLOC", "ARRAY", "MIPMAP"}

SCALARS = {
    "int", "unsigned int", "unsigned", "size_t", "unsigned long long", "long long",
    "cuuint64_t", "cuuint32_t", "CUdeviceptr", "float", "unsigned char", "unsigned short",
    "CUgraphConditionalHandle",
}


def fail(msg):
    sys.exit("gen-forward: " + msg)


def read_prototypes(cc, cuda_home):
    """exported name -> [(type, name)], from cuda.h preprocessed twice (legacy and
    per-thread default stream), so that _ptsz/_ptds names are declared too."""
    protos = {}
    typedefs = set()
    for extra in ("", "#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1\n"):
        src = extra + "#include <cuda.h>\n"
        out = subprocess.run([cc, "-E", "-P", "-I", os.path.join(cuda_home, "include"), "-x", "c", "-"],
                             input=src, capture_output=True, text=True, check=True).stdout
        text = re.sub(r"\s+", " ", out)
        for m in re.finditer(r"\bCUresult (cu\w+)\s*\(([^;]*?)\)\s*;", text):
            name, params = m.group(1), m.group(2).strip()
            args = []
            if params and params != "void":
                for p in params.split(","):
                    p = p.strip()
                    pm = re.match(r"^(.*?)(\w+)(\s*\[\s*\])?$", p)
                    if not pm:
                        fail("cannot read parameter '%s' of %s" % (p, name))
                    ty = re.sub(r"\s+", " ", pm.group(1)).strip()
                    ty = ty.replace(" *", "*").replace("* ", "*")
                    if pm.group(3):
                        ty += "*"
                    args.append((ty, pm.group(2)))
            protos.setdefault(name, args)
        for m in re.finditer(r"typedef (?:struct|union|enum) \w+ \{.*?\} (\w+)\s*;", text):
            typedefs.add(m.group(1))
        for m in re.finditer(r"typedef [^;{}()]*?\b(\w+)\s*;", text):
            typedefs.add(m.group(1))
    return protos, typedefs


def read_def(path):
    entries = []
    for lineno, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        ent = {"sym": words[0], "opts": set(), "roles": {}, "line": lineno}
        for w in words[1:]:
            if "=" in w:
                k, v = w.split("=", 1)
                ent["roles"][k] = v
            else:
                ent["opts"].add(w)
        entries.append(ent)
    return entries


def base_type(ty):
    t = ty.replace("const ", "").replace("*", "").strip()
    return t


def value_size(a):
    """The bytes an in/out argument points to: its type's, or the one its
    role names for a void *."""
    if base_type(a["type"]) == "void":
        return "sizeof(%s)" % a["base"]
    return "sizeof(*%s)" % a["name"]


def infer(ent, args):
    """Gives each argument a role dict: kind of role and its details."""
    out = []
    names = [n for _, n in args]
    for ty, name in args:
        spec = ent["roles"].get(name)
        ptr = ty.count("*")
        bt = base_type(ty)
        r = {"name": name, "type": ty, "base": bt}
        if spec:
            m = re.match(r"^(\w+\??)(?:\[(\w+)\])?(?::(\w+))?(?:@(\w+))?$", spec)
            if not m:
                fail("%s: bad role '%s' for %s" % (ent["sym"], spec, name))
            role, cnt, kind, owner = m.groups()
            r["nullable"] = role.endswith("?")
            r["role"] = role.rstrip("?")
            if cnt:
                if cnt not in names:
                    fail("%s: count %s of %s is not an argument" % (ent["sym"], cnt, name))
                r["count"] = cnt
            if kind and r["role"] in ("in", "out", "inout") and bt == "void":
                r["base"] = kind   # a void * of one known type: in:T / out:T
            elif kind:
                r["kind"] = kind
            if owner:
                r["owner"] = owner
        elif bt in KINDS and ptr == 0:
            r["role"] = "h"
            r["kind"] = KINDS[bt][0]
        elif bt in KINDS and ptr == 1 and not ty.startswith("const"):
            r["role"] = "new"
            r["kind"] = KINDS[bt][0]
        elif ptr == 0 and (bt in SCALARS or bt.startswith("CU") or bt.endswith("_t")):
            r["role"] = "val"
        elif ptr == 1 and ty.startswith("const") and bt != "void" and bt != "char":
            r["role"] = "in"
        elif ptr == 1 and not ty.startswith("const") and bt != "void":
            r["role"] = "out"
        else:
            fail("%s: give a role for argument %s (%s)" % (ent["sym"], name, ty))
        r.setdefault("nullable", False)
        if r["role"] in ("h", "new", "get", "del", "hin", "hout") and "kind" not in r:
            if bt not in KINDS:
                fail("%s: %s needs a kind" % (ent["sym"], name))
            r["kind"] = KINDS[bt][0]
        if r["role"] not in ("val", "h", "del", "new", "get", "in", "out", "inout", "count",
                             "ain", "aout", "hin", "hout", "str"):
            fail("%s: unknown role %s" % (ent["sym"], r["role"]))
        if r["role"] in ("ain", "aout", "hin", "hout") and "count" not in r:
            fail("%s: array %s needs a count" % (ent["sym"], name))
        out.append(r)
    return out


def c_ident(sym):
    return sym


class Gen:
    LOCALS = {"q", "o", "call", "r", "extra", "extra_len", "at", "end", "want", "got", "cur", "sctx", "n", "k",
              "p", "h", "i", "c", "m", "cap"}

    def __init__(self, entries, protos, typedefs):
        self.entries = entries
        self.protos = protos
        self.typedefs = typedefs
        self.funcs = []   # (entry, args, variants)
        for e in entries:
            if e["sym"] not in protos:
                fail("%s (forward.def line %d) is not declared by cuda.h" % (e["sym"], e["line"]))
            for _, n in protos[e["sym"]]:
                if n in self.LOCALS:
                    fail("%s: argument name %s is a local of the generated code" % (e["sym"], n))
            args = infer(e, protos[e["sym"]])
            variants = [e["sym"]]
            for suf in ("_ptsz", "_ptds"):
                if suf[1:] in e["opts"]:
                    v = e["sym"] + suf
                    if v not in protos:
                        fail("%s is not declared by cuda.h" % v)
                    variants.append(v)
            self.funcs.append((e, args, variants))

    # ---- the wire ----------------------------------------------------------

    def msg_fields(self, args):
        f = []
        for i, a in enumerate(args):
            r = a["role"]
            if r in ("val", "h", "del", "count") or (r == "str"):
                f.append("\tuint64_t a%d;   /* %s (%s) */" % (i, a["name"], r))
            elif r in ("in", "inout"):
                f.append("\tuint8_t a%d[MPS_FWD_ROUND(sizeof(%s))];   /* %s */" % (i, a["base"], a["name"]))
        return f

    def reply_fields(self, args):
        f = []
        for i, a in enumerate(args):
            r = a["role"]
            if r in ("new", "get"):
                f.append("\tuint64_t o%d;   /* %s */" % (i, a["name"]))
            elif r in ("out", "inout"):
                f.append("\tuint8_t o%d[MPS_FWD_ROUND(sizeof(%s))];   /* %s */" % (i, a["base"], a["name"]))
        return f

    def arrays_out(self, args):
        return [(i, a) for i, a in enumerate(args) if a["role"] in ("aout", "hout")]

    def arrays_in(self, args):
        return [(i, a) for i, a in enumerate(args) if a["role"] in ("ain", "hin", "str")]

    def elem_size(self, a):
        if a["role"] in ("hin", "hout"):
            return "sizeof(uint32_t)"
        return "sizeof(%s)" % a["base"]

    def wire(self):
        o = []
        o.append(HEADER % "src/common/forward.def")
        o.append("""/*
 * The forwarded functions on the wire (see tools/gen-forward.py and
 * src/common/forward.def). Each function has one op. Its message carries
 * one 8-byte field per scalar, handle or count argument and the bytes of
 * each fixed-size input, then its input arrays and strings, each padded to
 * 8 bytes; `present` has bit i set when pointer argument i was not NULL.
 * Outputs come back in the reply slot's data as struct mps_fwd_<fn>_out;
 * output arrays follow it, `off` elements in, as many as fit: the client asks
 * again for the rest.
 */
#ifndef MPS_COMMON_GEN_FORWARD_WIRE_H
#define MPS_COMMON_GEN_FORWARD_WIRE_H

#include <stdint.h>

#include <cuda.h>

#include "common/region.h"

#define MPS_FWD_ROUND(n) (((n) + 7) & ~(size_t)7)

/* Message flags of a forwarded op. */
#define MPS_FWD_PER_THREAD 0x1   /* the _ptsz/_ptds variant: stream 0 is the thread's own */
""")
        ops = []
        for e, args, variants in self.funcs:
            s = e["sym"]
            ops.append("\tX(FWD_%s, fwd_%s, mps_fwd_%s, %s)" % (s, s, s, "MPS_ASYNC" if "async" in e["opts"] else "MPS_SYNC"))
            o.append("struct mps_fwd_%s {" % s)
            o.append("\tstruct mps_msg hdr;")
            o.append("\tuint64_t present;")
            o.append("\tuint64_t off;      /* output arrays: the first element wanted */")
            o.extend(self.msg_fields(args))
            o.append("};")
            o.append("_Static_assert(sizeof(struct mps_fwd_%s) %% 8 == 0, \"8-byte fields\");" % s)
            rf = self.reply_fields(args)
            outs = self.arrays_out(args)
            o.append("struct mps_fwd_%s_out {" % s)
            o.append("\tuint64_t count;    /* output arrays: elements the driver gave */")
            o.extend(rf)
            o.append("};")
            if outs:
                o.append("/* Output array elements that fit in one reply. */")
                o.append("#define MPS_FWD_%s_CHUNK ((MPS_SLOT_DATA - sizeof(struct mps_fwd_%s_out)) / (%s))" %
                         (s, s, " + ".join(self.elem_size(a) for _, a in outs)))
            o.append("_Static_assert(sizeof(struct mps_fwd_%s_out) <= MPS_SLOT_DATA, \"fits a slot\");" % s)
            o.append("")
        o.append("#define MPS_FWD_OPS(X) \\")
        o.append(" \\\n".join(ops))
        o.append("")
        o.append("#endif")
        return "\n".join(o) + "\n"

    # ---- the client --------------------------------------------------------

    def client(self):
        o = [HEADER % "src/common/forward.def"]
        o.append("""/*
 * The client side of the forwarded functions: check and translate the
 * arguments, pack one message, wait for the reply (synchronous functions) and
 * unpack the outputs. Handles go through mps__fwd_* (client/forward.h).
 */
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/client.h"
#include "client/forward.h"
#include "client/gen/forward.h"
""")
        impls = []
        for e, args, variants in self.funcs:
            for v in variants:
                o.append(self.client_fn(e, args, v))
                if "client" not in e["opts"]:
                    if v == e["sym"]:
                        impls.append("\tMPS_IMPL(%s, mps__fwd_%s)," % (v, v))
                    else:
                        impls.append("\tMPS_IMPL_AS(%s, %s, mps__fwd_%s)," % (v, e["sym"], v))
        o.append("const struct mps_impl mps__forward_api[] = {")
        o.extend(impls)
        o.append("\tMPS_IMPL_END")
        o.append("};")
        return "\n".join(o) + "\n"

    def client_fn(self, e, args, v):
        s = e["sym"]
        per_thread = v != s
        params = ", ".join("%s %s" % (ty if not ty.endswith("*") else ty[:-1] + " *", n)
                           for ty, n in self.protos[v]) or "void"
        params = params.replace(" * ", " *").replace("  ", " ")
        L = []
        L.append("CUresult mps__fwd_%s(%s)" % (v, params))
        L.append("{")
        L.append("\tstruct mps_fwd_%s q;" % s)
        is_async = "async" in e["opts"]
        outs = self.arrays_out(args)
        ins = self.arrays_in(args)
        if not is_async:
            L.append("\tstruct mps_fwd_%s_out *o;" % s)
            L.append("\tstruct mps_call call;")
        if ins:
            L.append("\tuint8_t *extra = NULL;")
            L.append("\tsize_t extra_len = 0, at = 0;")
        if outs:
            L.append("\tsize_t want = 0, got = 0;")
        L.append("\tuint32_t cur = 0, sctx = 0;")
        L.append("\tCUresult r;")
        L.append("")
        L.append("\tmemset(&q, 0, sizeof(q));")
        L.append("\tq.hdr.flags = %s;" % ("MPS_FWD_PER_THREAD" if per_thread else "0"))
        need_ctx = "noctx" not in e["opts"]
        L.append("\tr = mps__fwd_ctx(&cur, %s);" % ("true" if need_ctx else "false"))
        L.append("\tif (r != CUDA_SUCCESS)")
        L.append("\t\treturn r;")
        for i, a in enumerate(args):
            n, r = a["name"], a["role"]
            if r == "val":
                if a["base"] == "float":
                    L.append("\tmemcpy(&q.a%d, &%s, sizeof(%s));" % (i, n, n))
                elif "*" in a["type"]:
                    L.append("\tq.a%d = (uint64_t)(uintptr_t)%s;" % (i, n))
                else:
                    L.append("\tq.a%d = (uint64_t)%s;" % (i, n))
            elif r in ("h", "del"):
                k = a["kind"]
                if k == "STREAM":
                    L.append("\tr = mps__fwd_stream(%s, %s, &q.a%d, &sctx);" % (n, "true" if per_thread else "false", i))
                elif k == "DEVICE":
                    L.append("\tr = mps__fwd_device(%s, &q.a%d);" % (n, i))
                else:
                    L.append("\tr = mps__fwd_h_%s(%s, &q.a%d);" % (k.lower(), n, i))
                L.append("\tif (r != CUDA_SUCCESS)")
                L.append("\t\treturn r;")
            elif r == "in":
                if a["nullable"]:
                    L.append("\tif (%s) {" % n)
                    L.append("\t\tmemcpy(q.a%d, %s, %s);" % (i, n, value_size(a)))
                    L.append("\t\tq.present |= 1ull << %d;" % i)
                    L.append("\t}")
                else:
                    L.append("\tif (!%s)" % n)
                    L.append("\t\treturn CUDA_ERROR_INVALID_VALUE;")
                    L.append("\tmemcpy(q.a%d, %s, %s);" % (i, n, value_size(a)))
                    L.append("\tq.present |= 1ull << %d;" % i)
            elif r in ("out", "new", "get"):
                if a["nullable"]:
                    L.append("\tif (%s)" % n)
                    L.append("\t\tq.present |= 1ull << %d;" % i)
                else:
                    L.append("\tif (!%s)" % n)
                    L.append("\t\treturn CUDA_ERROR_INVALID_VALUE;")
                    L.append("\tq.present |= 1ull << %d;" % i)
            elif r in ("inout",):
                L.append("\tif (!%s)" % n)
                L.append("\t\treturn CUDA_ERROR_INVALID_VALUE;")
                L.append("\tq.present |= 1ull << %d;" % i)
                L.append("\tmemcpy(q.a%d, %s, %s);" % (i, n, value_size(a)))
            elif r == "count":
                L.append("\tif (!%s)" % n)
                L.append("\t\treturn CUDA_ERROR_INVALID_VALUE;")
                L.append("\tq.a%d = (uint64_t)*%s;" % (i, n))
            elif r in ("aout", "hout"):
                L.append("\tif (%s)" % n)
                L.append("\t\tq.present |= 1ull << %d;" % i)
            elif r in ("ain", "hin"):
                L.append("\tif (%s)" % n)
                L.append("\t\tq.present |= 1ull << %d;" % i)
            elif r == "str":
                L.append("\tif (!%s)" % n)
                L.append("\t\treturn CUDA_ERROR_INVALID_VALUE;")
                L.append("\tq.a%d = strlen(%s);" % (i, n))
                L.append("\tq.present |= 1ull << %d;" % i)
        if ins:
            # Sizes first, then one buffer.
            for i, a in ins:
                n = a["name"]
                if a["role"] == "str":
                    L.append("\textra_len += MPS_FWD_ROUND(q.a%d + 1);" % i)
                else:
                    cnt = a["count"]
                    L.append("\tif (%s && (uint64_t)%s > MPS_MSG_MAX / %s)" % (n, self.count_expr(args, cnt), self.elem_size(a)))
                    L.append("\t\treturn CUDA_ERROR_INVALID_VALUE;")
                    L.append("\tif (%s)" % n)
                    L.append("\t\textra_len += MPS_FWD_ROUND((size_t)%s * %s);" % (self.count_expr(args, cnt), self.elem_size(a)))
            L.append("\tif (sizeof(q) + extra_len > MPS_MSG_MAX)")
            L.append("\t\treturn CUDA_ERROR_INVALID_VALUE;")
            L.append("\textra = calloc(1, extra_len ? extra_len : 1);")
            L.append("\tif (!extra)")
            L.append("\t\treturn CUDA_ERROR_OUT_OF_MEMORY;")
            for i, a in ins:
                n = a["name"]
                if a["role"] == "str":
                    L.append("\tmemcpy(extra + at, %s, q.a%d);" % (n, i))
                    L.append("\tat += MPS_FWD_ROUND(q.a%d + 1);" % i)
                    continue
                cnt = self.count_expr(args, a["count"])
                L.append("\tif (%s) {" % n)
                if a["role"] == "hin":
                    L.append("\t\tfor (size_t i = 0; i < (size_t)%s; i++) {" % cnt)
                    L.append("\t\t\tuint64_t h = 0;")
                    L.append("")
                    L.append("\t\t\tr = mps__fwd_h_%s(%s[i], &h);" % (a["kind"].lower(), n))
                    L.append("\t\t\tif (r != CUDA_SUCCESS) {")
                    L.append("\t\t\t\tfree(extra);")
                    L.append("\t\t\t\treturn r;")
                    L.append("\t\t\t}")
                    L.append("\t\t\t((uint32_t *)(extra + at))[i] = (uint32_t)h;")
                    L.append("\t\t}")
                else:
                    L.append("\t\tmemcpy(extra + at, %s, (size_t)%s * %s);" % (n, cnt, self.elem_size(a)))
                L.append("\t\tat += MPS_FWD_ROUND((size_t)%s * %s);" % (cnt, self.elem_size(a)))
                L.append("\t}")
        ex = ("extra", "extra_len") if ins else ("NULL", "0")
        if is_async:
            L.append("\tr = mps__post(MPS_OP_FWD_%s, sctx ? sctx : cur, &q.hdr, sizeof(q), %s, %s);" % (s, ex[0], ex[1]))
            if ins:
                L.append("\tfree(extra);")
            L.append("\treturn r;")
            L.append("}")
            return "\n".join(L) + "\n"
        if outs:
            cnt = outs[0][1]["count"]
            L.append("\twant = (size_t)q.a%d;" % self.arg_index(args, cnt))
            L.append("\tdo {")
            L.append("\t\tq.off = got;")
            ind = "\t\t"
        else:
            ind = "\t"
        L.append(ind + "r = mps__call(MPS_OP_FWD_%s, sctx ? sctx : cur, &q.hdr, sizeof(q), %s, %s, &call);" % (s, ex[0], ex[1]))
        L.append(ind + "o = call.s ? (struct mps_fwd_%s_out *)call.s->data : NULL;" % s)
        L.append(ind + ("if (o) {" if "outerr" in e["opts"] else "if (r == CUDA_SUCCESS && o) {"))
        ind2 = ind + "\t"
        for i, a in enumerate(args):
            n, r = a["name"], a["role"]
            if r == "new" or r == "get":
                L.append(ind2 + "if (%s && r == CUDA_SUCCESS)" % n)
                if a["kind"] == "EVENT":
                    L.append(ind2 + "\tr = mps__fwd_event_of((uint32_t)o->o%d, %s);" % (i, n))
                elif KINDS[KIND_TYPE[a["kind"]]][2] == "int":
                    L.append(ind2 + "\t*%s = (%s)o->o%d;" % (n, KIND_TYPE[a["kind"]], i))
                else:
                    owner = self.client_owner(args, a)
                    L.append(ind2 + "\tr = mps__fwd_obj(MPS_H_%s, (uint32_t)o->o%d, %s, (void **)%s);" %
                             (a["kind"], i, owner, n))
            elif r == "del" and a["kind"] in GENERIC:
                L.append(ind2 + "mps__fwd_drop(MPS_H_%s, (uint32_t)q.a%d);" % (a["kind"], i))
            elif r in ("out", "inout"):
                if a["nullable"]:
                    L.append(ind2 + "if (%s)" % n)
                    L.append(ind2 + "\tmemcpy(%s, o->o%d, %s);" % (n, i, value_size(a)))
                else:
                    L.append(ind2 + "memcpy(%s, o->o%d, %s);" % (n, i, value_size(a)))
        if outs:
            cnt_arg = self.arg_by_name(args, outs[0][1]["count"])
            L.append(ind2 + "size_t n = o->count > want ? want : (size_t)o->count;")
            L.append(ind2 + "size_t k = n > got ? n - got : 0;")
            L.append(ind2 + "const uint8_t *p = (const uint8_t *)(o + 1);")
            L.append("")
            L.append(ind2 + "if (k > MPS_FWD_%s_CHUNK)" % s)
            L.append(ind2 + "\tk = MPS_FWD_%s_CHUNK;" % s)
            for i, a in outs:
                n = a["name"]
                L.append(ind2 + "if (%s) {" % n)
                if a["role"] == "hout":
                    owner = self.client_owner(args, a)
                    L.append(ind2 + "\tfor (size_t i = 0; i < k && r == CUDA_SUCCESS; i++) {")
                    L.append(ind2 + "\t\tuint32_t h;")
                    L.append("")
                    L.append(ind2 + "\t\tmemcpy(&h, p + i * sizeof(h), sizeof(h));")
                    L.append(ind2 + "\t\tif (!h)")
                    L.append(ind2 + "\t\t\t%s[got + i] = NULL;" % n)
                    L.append(ind2 + "\t\telse")
                    L.append(ind2 + "\t\t\tr = mps__fwd_obj(MPS_H_%s, h, %s, (void **)&%s[got + i]);" % (a["kind"], owner, n))
                    L.append(ind2 + "\t}")
                else:
                    L.append(ind2 + "\tmemcpy(%s + got, p, k * %s);" % (n, self.elem_size(a)))
                L.append(ind2 + "}")
                L.append(ind2 + "p += MPS_FWD_%s_CHUNK * %s;" % (s, self.elem_size(a)))
            L.append(ind2 + "got += k;")
            L.append(ind2 + "if (got >= n) {")
            L.append(ind2 + "\t*%s = (%s)o->count;" % (cnt_arg["name"], base_type(cnt_arg["type"])))
            L.append(ind2 + "\tfor (size_t i = n; i < want; i++) {")
            for i, a in outs:
                if a["role"] == "hout":
                    L.append(ind2 + "\t\tif (%s)" % a["name"])
                    L.append(ind2 + "\t\t\t%s[i] = NULL;" % a["name"])
            L.append(ind2 + "\t}")
            L.append(ind2 + "}")
        L.append(ind + "}")
        L.append(ind + "mps__call_end(&call);")
        if outs:
            L.append("\t} while (r == CUDA_SUCCESS && got < want && got < (size_t)*%s && (%s));" %
                     (self.arg_by_name(args, outs[0][1]["count"])["name"],
                      " || ".join(a["name"] for _, a in outs)))
        if ins:
            L.append("\tfree(extra);")
        L.append("\treturn r;")
        L.append("}")
        return "\n".join(L) + "\n"

    def client_header(self):
        o = [HEADER % "src/common/forward.def"]
        o.append("""/*
 * The client side of each forwarded function (gen/forward.c), for
 * hand-written client code that forwards after work of its own.
 */
#ifndef MPS_CLIENT_GEN_FORWARD_H
#define MPS_CLIENT_GEN_FORWARD_H

#include <cuda.h>
""")
        for e, args, variants in self.funcs:
            for v in variants:
                params = ", ".join("%s %s" % (ty if not ty.endswith("*") else ty[:-1] + " *", n)
                                   for ty, n in self.protos[v]) or "void"
                params = params.replace(" * ", " *").replace("  ", " ")
                o.append("CUresult mps__fwd_%s(%s);" % (v, params))
        o.append("")
        o.append("#endif")
        return "\n".join(o) + "\n"

    def arg_index(self, args, name):
        for i, a in enumerate(args):
            if a["name"] == name:
                return i
        fail("no argument %s" % name)

    def arg_by_name(self, args, name):
        return args[self.arg_index(args, name)]

    def count_expr(self, args, name):
        a = self.arg_by_name(args, name)
        if a["role"] == "count":
            return "*%s" % name
        return name

    def client_owner(self, args, a):
        """The handle of the object that owns a returned node or graph: the
        argument named with @, else the first graph, else 0. A new graph (a
        clone) is nobody's: it outlives the graph it was made from."""
        if a.get("owner"):
            oi = self.arg_index(args, a["owner"])
            return "(uint32_t)q.a%d" % oi
        if a["role"] == "new" and a["kind"] == "GRAPH":
            return "0"
        if a["kind"] in ("NODE", "GRAPH"):
            for i, b in enumerate(args):
                if b["role"] in ("h", "del") and b["kind"] == "GRAPH":
                    return "(uint32_t)q.a%d" % i
        return "0"

    # ---- the server --------------------------------------------------------

    def server(self):
        o = [HEADER % "src/common/forward.def"]
        o.append("""/*
 * The server side of the forwarded functions: each handler checks the
 * message's length against its arrays, looks every handle up in the client's
 * table (server/forward.h), calls the driver or the function's hook, and
 * registers what the driver made. A handle the client does not own, a
 * missing argument or an array that overruns the message is refused before
 * the driver sees anything.
 */
#include <stdlib.h>
#include <string.h>

#include "server/driver.h"
#include "server/forward.h"
#include "server/server.h"
#include "server/streams.h"
""")
        for e, args, variants in self.funcs:
            o.append(self.server_fn(e, args))
        return "\n".join(o) + "\n"

    def server_fn(self, e, args):
        s = e["sym"]
        is_async = "async" in e["opts"]
        outs = self.arrays_out(args)
        ins = self.arrays_in(args)
        L = []
        L.append("void mps__op_fwd_%s(struct mps_client *c, const struct mps_msg *m)" % s)
        L.append("{")
        if args:   # a function of no arguments reads nothing of its message
            L.append("\tconst struct mps_fwd_%s *q = (const void *)m;" % s)
        if not is_async and (outs or any(a["role"] in ("new", "get", "out", "inout") for a in args)):
            L.append("\tstruct mps_fwd_%s_out *o = (void *)mps__slot(c, m->slot)->data;" % s)
        decls = []
        for i, a in enumerate(args):
            n, r, bt = a["name"], a["role"], a["base"]
            if r == "val":
                decls.append("\t%s %s;" % (a["type"] if "*" in a["type"] else bt, n))
            elif r in ("h", "del"):
                k = a["kind"]
                if k == "STREAM":
                    decls.append("\tstruct mps_sstream *%s_s = NULL;" % n)
                else:
                    decls.append("\t%s %s = 0;" % (KIND_TYPE[k], n))
                    decls.append("\tvoid *%s_o = NULL;" % n) if k not in ("DEVICE",) else None
            elif r == "in":
                decls.append("\t%s %s_v;" % (bt, n))
            elif r in ("out", "inout"):
                decls.append("\t%s %s_v;" % (bt, n))
            elif r in ("new", "get"):
                decls.append("\t%s %s_v = 0;" % (KIND_TYPE[a["kind"]], n))
            elif r == "count":
                decls.append("\t%s %s_v;" % (base_type(a["type"]), n))
            elif r in ("ain",):
                decls.append("\tconst %s *%s = NULL;" % (bt, n))
            elif r in ("hin",):
                decls.append("\t%s *%s = NULL;" % (KIND_TYPE[a["kind"]], n))
            elif r in ("aout",):
                decls.append("\t%s *%s = NULL;" % (bt, n))
            elif r in ("hout",):
                decls.append("\t%s *%s = NULL;" % (KIND_TYPE[a["kind"]], n))
            elif r == "str":
                decls.append("\tconst char *%s = NULL;" % n)
        decls = [d for d in decls if d]
        L.extend(decls)
        if ins:
            L.append("\tconst uint8_t *at = (const uint8_t *)(q + 1), *end = (const uint8_t *)m + m->len;")
        if outs:
            L.append("\tsize_t cap = 0, k;")
        L.append("\tCUresult r;")
        L.append("")
        if "outerr" in e["opts"]:
            L.append("\tmemset(o, 0, sizeof(*o));   /* read on failure too */")
        L.append("\tr = mps__fwd_begin(c, m, %s);" % ("true" if "noctx" not in e["opts"] else "false"))
        L.append("\tif (r != CUDA_SUCCESS)")
        L.append("\t\tgoto out;")
        need = 0
        for i, a in enumerate(args):
            if a["role"] in ("new", "get", "out", "inout") and not a["nullable"]:
                need |= 1 << i
        if need:
            # An output the caller gave no place for: the driver's answer to
            # a NULL pointer, and nothing made that no one could name.
            L.append("\tif ((q->present & 0x%xull) != 0x%xull) {" % (need, need))
            L.append("\t\tr = CUDA_ERROR_INVALID_VALUE;")
            L.append("\t\tgoto out;")
            L.append("\t}")
        for i, a in enumerate(args):
            n, r, bt = a["name"], a["role"], a["base"]
            if r == "val":
                if bt == "float":
                    L.append("\tmemcpy(&%s, &q->a%d, sizeof(%s));" % (n, i, n))
                elif "*" in a["type"]:
                    L.append("\t%s = (%s)(uintptr_t)q->a%d;" % (n, a["type"], i))
                else:
                    L.append("\t%s = (%s)q->a%d;" % (n, bt, i))
            elif r in ("h", "del"):
                k = a["kind"]
                if k == "STREAM":
                    L.append("\t%s_s = mps__fwd_stream(c, m, (uint32_t)q->a%d, %s, &r);" %
                             (n, i, "true" if is_async else "false"))
                    L.append("\tif (!%s_s)" % n)
                    L.append("\t\tgoto out;")
                elif k == "DEVICE":
                    L.append("\tr = mps__fwd_device(c, q->a%d, &%s);" % (i, n))
                    L.append("\tif (r != CUDA_SUCCESS)")
                    L.append("\t\tgoto out;")
                else:
                    L.append("\t%s_o = mps__fwd_get(c, MPS_H_%s, q->a%d, (void **)&%s, &r);" % (n, k, i, n))
                    L.append("\tif (!%s_o)" % n)
                    L.append("\t\tgoto out;")
            elif r == "in":
                if a["nullable"]:
                    L.append("\tif (q->present & (1ull << %d))" % i)
                    L.append("\t\tmemcpy(&%s_v, q->a%d, sizeof(%s_v));" % (n, i, n))
                else:
                    L.append("\tmemcpy(&%s_v, q->a%d, sizeof(%s_v));" % (n, i, n))
            elif r == "inout":
                L.append("\tmemcpy(&%s_v, q->a%d, sizeof(%s_v));" % (n, i, n))
            elif r == "out":
                L.append("\tmemset(&%s_v, 0, sizeof(%s_v));" % (n, n))
        for i, a in ins:
            n = a["name"]
            if a["role"] == "str":
                L.append("\t%s = mps__fwd_str(&at, end, q->a%d, &r);" % (n, i))
                L.append("\tif (!%s)" % n)
                L.append("\t\tgoto out;")
                continue
            cnt = a["count"]
            cexpr = "q->a%d" % self.arg_index(args, cnt)
            L.append("\tif (q->present & (1ull << %d)) {" % i)
            L.append("\t\tconst void *p = mps__fwd_array(&at, end, %s, %s, &r);" % (cexpr, self.elem_size(a)))
            L.append("")
            L.append("\t\tif (!p)")
            L.append("\t\t\tgoto out;")
            if a["role"] == "hin":
                L.append("\t\t%s = mps__fwd_handles(c, MPS_H_%s, p, (size_t)%s, &r);" % (n, a["kind"], cexpr))
                L.append("\t\tif (!%s)" % n)
                L.append("\t\t\tgoto out;")
            else:
                L.append("\t\t%s = p;" % n)
            if a["nullable"]:
                L.append("\t}")
            else:
                # An absent array of elements the driver is told exist:
                # refused here, never handed to the driver as NULL.
                L.append("\t} else if (%s) {" % cexpr)
                L.append("\t\tr = CUDA_ERROR_INVALID_VALUE;")
                L.append("\t\tgoto out;")
                L.append("\t}")
        if outs:
            cnt = outs[0][1]["count"]
            ci = self.arg_index(args, cnt)
            L.append("\tcap = mps__fwd_out_cap(q->a%d);" % ci)
            cnt_name = self.arg_by_name(args, cnt)["name"]
            L.append("\t%s_v = (%s)cap;" % (cnt_name, base_type(self.arg_by_name(args, cnt)["type"])))
            for i, a in outs:
                n = a["name"]
                ety = KIND_TYPE[a["kind"]] if a["role"] == "hout" else a["base"]
                L.append("\tif ((q->present & (1ull << %d)) && cap) {" % i)
                L.append("\t\t%s = calloc(cap, sizeof(*%s));" % (n, n))
                L.append("\t\tif (!%s) {" % n)
                L.append("\t\t\tr = CUDA_ERROR_OUT_OF_MEMORY;")
                L.append("\t\t\tgoto out;")
                L.append("\t\t}")
                L.append("\t}")
        # The call.
        call_args = []
        for i, a in enumerate(args):
            n, r = a["name"], a["role"]
            if r in ("val",):
                call_args.append(n)
            elif r in ("h", "del"):
                if a["kind"] == "STREAM":
                    call_args.append(("%s_s" if "hook" in e["opts"] else "%s_s->s") % n)
                else:
                    call_args.append(n)
            elif r == "in":
                if a["nullable"]:
                    call_args.append("(q->present & (1ull << %d)) ? &%s_v : NULL" % (i, n))
                else:
                    call_args.append("&%s_v" % n)
            elif r in ("out", "inout", "new", "get", "count"):
                if a["nullable"]:
                    call_args.append("(q->present & (1ull << %d)) ? &%s_v : NULL" % (i, n))
                else:
                    call_args.append("&%s_v" % n)
            elif r == "ain" and "const" not in a["type"]:
                # A prototype without const (the driver may write into the
                # array, e.g. cuStreamBatchMemOp's alias fields): the
                # message is the server's own copy, so it may.
                call_args.append("(%s)%s" % (a["type"], n))
            elif r in ("ain", "aout", "hin", "hout", "str"):
                call_args.append(n)
        if "hook" in e["opts"]:
            L.append("\tr = mps__hook_%s(c, %s);" % (s, ", ".join(call_args)))
        else:
            L.append("\tif (!mps_drv.%s) {" % s)
            L.append("\t\tr = CUDA_ERROR_NOT_SUPPORTED;")
            L.append("\t\tgoto out;")
            L.append("\t}")
            L.append("\tr = mps_drv.%s(%s);" % (s, ", ".join(call_args)))
        if "outerr" in e["opts"]:
            for i, a in enumerate(args):
                if a["role"] in ("out", "inout"):
                    L.append("\tmemcpy(o->o%d, &%s_v, sizeof(%s_v));" % (i, a["name"], a["name"]))
        L.append("\tif (r != CUDA_SUCCESS)")
        L.append("\t\tgoto out;")
        # Results.
        for i, a in enumerate(args):
            n, r = a["name"], a["role"]
            if r == "new":
                owner = self.server_owner(args, a)
                L.append("\tif (q->present & (1ull << %d)) {" % i)
                L.append("\t\tr = mps__fwd_new(c, MPS_H_%s, (void *)(uintptr_t)%s_v, %s, &o->o%d);" % (a["kind"], n, owner, i))
                L.append("\t\tif (r != CUDA_SUCCESS)")
                L.append("\t\t\tgoto out;")
                L.append("\t}")
            elif r == "get":
                owner = self.server_owner(args, a)
                L.append("\tif (q->present & (1ull << %d)) {" % i)
                L.append("\t\tr = mps__fwd_handle_of(c, MPS_H_%s, (void *)(uintptr_t)%s_v, %s, &o->o%d);" % (a["kind"], n, owner, i))
                L.append("\t\tif (r != CUDA_SUCCESS)")
                L.append("\t\t\tgoto out;")
                L.append("\t}")
            elif r in ("out", "inout") and "outerr" not in e["opts"]:
                L.append("\tmemcpy(o->o%d, &%s_v, sizeof(%s_v));" % (i, n, n))
            elif r == "del":
                L.append("\tmps__fwd_del(c, MPS_H_%s, (uint32_t)q->a%d);" % (a["kind"], i))
        if outs:
            cnt = outs[0][1]["count"]
            cnt_name = self.arg_by_name(args, cnt)["name"]
            L.append("\to->count = (uint64_t)%s_v;" % cnt_name)
            L.append("\tk = mps__fwd_chunk(%s_v < cap ? (size_t)%s_v : cap, q->off, MPS_FWD_%s_CHUNK);" %
                     (cnt_name, cnt_name, s))
            L.append("\t{")
            L.append("\t\tuint8_t *p = (uint8_t *)(o + 1);")
            L.append("")
            for i, a in outs:
                n = a["name"]
                L.append("\t\tif (%s) {" % n)
                if a["role"] == "hout":
                    owner = self.server_owner(args, a)
                    L.append("\t\t\tfor (size_t i = 0; i < k; i++) {")
                    L.append("\t\t\t\tuint64_t h = 0;")
                    L.append("")
                    L.append("\t\t\t\tif (%s[q->off + i]) {" % n)
                    L.append("\t\t\t\t\tr = mps__fwd_handle_of(c, MPS_H_%s, %s[q->off + i], %s, &h);" % (a["kind"], n, owner))
                    L.append("\t\t\t\t\tif (r != CUDA_SUCCESS)")
                    L.append("\t\t\t\t\t\tgoto out;")
                    L.append("\t\t\t\t}")
                    L.append("\t\t\t\t((uint32_t *)p)[i] = (uint32_t)h;")
                    L.append("\t\t\t}")
                else:
                    L.append("\t\t\tmemcpy(p, %s + q->off, k * %s);" % (n, self.elem_size(a)))
                L.append("\t\t}")
                L.append("\t\tp += MPS_FWD_%s_CHUNK * %s;" % (s, self.elem_size(a)))
            L.append("\t}")
        # A check whose failure goes where success goes too says nothing.
        if L[-2:] == ["\tif (r != CUDA_SUCCESS)", "\t\tgoto out;"]:
            del L[-2:]
        L.append("out:")
        for i, a in enumerate(args):
            if a["role"] in ("aout", "hout", "hin"):
                L.append("\tfree(%s);" % a["name"])
        if is_async:
            L.append("\tmps__defer_error(c, r, \"%s\");" % s)
        else:
            L.append("\tmps__reply(c, m->slot, r);")
        L.append("}")
        return "\n".join(L) + "\n"

    def server_owner(self, args, a):
        if a.get("owner"):
            return "(uint32_t)q->a%d" % self.arg_index(args, a["owner"])
        if a["role"] == "new" and a["kind"] == "GRAPH":
            return "0"
        if a["kind"] in ("NODE", "GRAPH"):
            for i, b in enumerate(args):
                if b["role"] in ("h", "del") and b["kind"] == "GRAPH":
                    return "(uint32_t)q->a%d" % i
            for i, b in enumerate(args):
                if b["role"] in ("h", "del") and b["kind"] == "NODE":
                    return "mps__fwd_owner(c, (uint32_t)q->a%d)" % i
        return "0"

    def driver(self):
        o = [HEADER % "src/common/forward.def"]
        o.append("""/*
 * The driver functions the forwarded functions call, looked up like the rest
 * of driver.h's but optional: a driver without one answers its function with
 * CUDA_ERROR_NOT_SUPPORTED.
 */
#ifndef MPS_SERVER_GEN_FORWARD_DRIVER_H
#define MPS_SERVER_GEN_FORWARD_DRIVER_H
""")
        names = [e["sym"] for e, _, _ in self.funcs]
        o.append("#define MPS_DRIVER_FWD(X) \\")
        o.append(" \\\n".join("\tX(%s)" % n for n in names))
        o.append("")
        o.append("#endif")
        return "\n".join(o) + "\n"

    def hooks(self):
        o = [HEADER % "src/common/forward.def"]
        o.append("""/*
 * The hand-written server halves of forwarded functions marked `hook`
 * (server/hooks.c): each takes the client and the driver function's
 * arguments, already translated (a stream as the client's stream object).
 */
#ifndef MPS_SERVER_GEN_FORWARD_HOOKS_H
#define MPS_SERVER_GEN_FORWARD_HOOKS_H

#include <cuda.h>

struct mps_client;
struct mps_sstream;
""")
        for e, args, variants in self.funcs:
            if "hook" not in e["opts"]:
                continue
            ps = ["struct mps_client *c"]
            for ty, n in self.protos[e["sym"]]:
                if base_type(ty) == "CUstream" and "*" not in ty:
                    ps.append("struct mps_sstream *%s" % n)
                else:
                    ps.append(("%s %s" % (ty, n)).replace("* ", "*").replace("*", " *").replace("  ", " "))
            o.append("CUresult mps__hook_%s(%s);" % (e["sym"], ", ".join(ps)))
        o.append("")
        o.append("#endif")
        return "\n".join(o) + "\n"


HEADER = """// SPDX-License-Identifier: MIT
// Generated by tools/gen-forward.py from %s; do not edit.
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda-home", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--check", action="store_true", help="only check that the outputs are up to date")
    args = ap.parse_args()
    protos, typedefs = read_prototypes(args.cc, args.cuda_home)
    g = Gen(read_def(os.path.join(ROOT, "src/common/forward.def")), protos, typedefs)
    outputs = {
        "src/common/gen/forward_wire.h": g.wire(),
        "src/client/gen/forward.c": g.client(),
        "src/client/gen/forward.h": g.client_header(),
        "src/server/gen/forward.c": g.server(),
        "src/server/gen/forward_driver.h": g.driver(),
        "src/server/gen/forward_hooks.h": g.hooks(),
    }
    stale = []
    for rel, text in outputs.items():
        path = os.path.join(ROOT, rel)
        old = open(path).read() if os.path.exists(path) else None
        if old == text:
            continue
        stale.append(rel)
        if not args.check:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
    if args.check and stale:
        sys.exit("gen-forward: out of date: %s (run make regen-forward)" % ", ".join(stale))


if __name__ == "__main__":
    main()
