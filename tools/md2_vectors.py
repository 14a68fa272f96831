#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# Independent reference for the MD2 / HMAC-MD2 / integrity-check vectors that
# tests/unit/test_md2.c and tests/unit/test_exports.c assert on.
#
# Python's hashlib has no MD2 on current OpenSSL builds, so this is a second,
# deliberately different implementation written from the RFC text: it pads
# the whole message up front, computes the checksum over the padded message
# in one pass, appends it, and only then runs the 18-round mix over every
# block (RFC 1319 sections 3.1 to 3.5 in order), where src/client/exports/md2.c
# streams. HMAC is the formula of RFC 2104 section 2 on byte strings.
#
# Run: python3 tools/md2_vectors.py   (prints C initialisers; exits 1 if the
# RFC 1319 test suite or, where hashlib has md2, hashlib disagrees).
import hmac as _hmac
import hashlib
import struct
import sys

# RFC 1319 section 3.4, the pi-derived permutation S.
S = [
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19,
    98, 167, 5, 243, 192, 199, 115, 140, 152, 147, 43, 217, 188, 76, 130, 202,
    30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
    190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122,
    169, 104, 121, 145, 21, 178, 7, 63, 148, 194, 16, 137, 11, 34, 95, 33,
    128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3,
    255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198,
    79, 184, 56, 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4, 241,
    69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2,
    27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15,
    85, 71, 163, 35, 221, 81, 175, 58, 195, 92, 249, 206, 186, 197, 234, 38,
    44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82,
    106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74,
    120, 136, 149, 139, 227, 99, 232, 109, 233, 203, 213, 254, 59, 0, 29, 57,
    242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10,
    49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20,
]
assert sorted(S) == list(range(256))


def md2(msg: bytes) -> bytes:
    # 3.1 padding: i bytes of value i, 1 <= i <= 16.
    i = 16 - len(msg) % 16
    m = bytearray(msg) + bytes([i]) * i
    # 3.2 checksum over the padded message (with the RFC's errata: xor in).
    c = [0] * 16
    l = 0
    for b in range(0, len(m), 16):
        for j in range(16):
            c[j] ^= S[m[b + j] ^ l]
            l = c[j]
    m += bytes(c)
    # 3.3 / 3.4: 48-byte buffer, 18 rounds per block.
    x = [0] * 48
    for b in range(0, len(m), 16):
        for j in range(16):
            x[16 + j] = m[b + j]
            x[32 + j] = x[16 + j] ^ x[j]
        t = 0
        for r in range(18):
            for k in range(48):
                x[k] ^= S[t]
                t = x[k]
            t = (t + r) % 256
    return bytes(x[:16])


def hmac_md2(key: bytes, msg: bytes) -> bytes:
    if len(key) > 16:
        key = md2(key)
    key = key.ljust(16, b"\0")
    ipad = bytes(k ^ 0x36 for k in key)
    opad = bytes(k ^ 0x5C for k in key)
    return md2(opad + md2(ipad + msg))


RFC1319 = [
    (b"", "8350e5a3e24c153df2275c9f80692773"),
    (b"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"),
    (b"abc", "da853b0d3f88d99b30283a69e6ded6bb"),
    (b"message digest", "ab4f496bfb2a530b219ff33031fe06b0"),
    (b"abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"),
    (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
     "da33def2a42df13975352846c30338cd"),
    (b"1234567890" * 8, "d5976f79d83d3a0dc9806c3c66f3efd8"),
]

# HMAC cases in the spirit of RFC 2104's appendix (which lists MD5 only):
# short keys, a key of exactly one block, keys longer than a block (hashed
# first), empty and multi-block messages.
HMAC_CASES = [
    ("key 0x0b*16, \"Hi There\"", b"\x0b" * 16, b"Hi There"),
    ("key \"Jefe\"", b"Jefe", b"what do ya want for nothing?"),
    ("key 0xaa*16, 0xdd*50", b"\xaa" * 16, b"\xdd" * 50),
    ("key 1..25, 0xcd*50", bytes(range(1, 26)), b"\xcd" * 50),
    ("key 0xaa*80 (hashed)", b"\xaa" * 80,
     b"Test Using Larger Than Block-Size Key - Hash Key First"),
    ("empty key, empty msg", b"", b""),
    ("key 0x01*17 (hashed), 16-byte msg", b"\x01" * 17, b"0123456789abcdef"),
]

# The integrity-check message (src/client/exports/integrity.h): a 48-byte
# little-endian record, then 28 bytes per device.
INTEGRITY_KEY = bytes([0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                       0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F])


def integrity(driver_version, version, pid, tid, cudart, table, fn, secs, devices):
    msg = struct.pack("<IIIIQQQQ", driver_version, version, pid, tid,
                      cudart, table, fn, secs)
    for uuid, dom, bus, dev in devices:
        msg += struct.pack("<16siii", uuid, dom, bus, dev)
    d = hmac_md2(INTEGRITY_KEY, msg)
    return struct.unpack("<QQ", d)


INTEGRITY_CASE = dict(
    driver_version=13000, version=13002, pid=4242, tid=0x9ABCDEF0,
    cudart=0x00007F1234560040, table=0x00007F12345600C0,
    fn=0x00007F1234001230, secs=1795000000,
    devices=[(bytes(range(0x10, 0x20)), 0, 0x19, 0),
             (bytes(range(0xA0, 0xB0)), 1, 0x9B, 3)],
)


def c_bytes(b: bytes) -> str:
    return "{ " + ", ".join("0x%02x" % v for v in b) + " }"


def main() -> int:
    ok = True
    for msg, want in RFC1319:
        got = md2(msg).hex()
        if got != want:
            print("RFC 1319 mismatch for %r: %s != %s" % (msg, got, want))
            ok = False
    if "md2" in hashlib.algorithms_available:
        for _, key, msg in HMAC_CASES:
            if _hmac.new(key, msg, "md2").digest() != hmac_md2(key, msg):
                print("hashlib disagrees on %r" % key)
                ok = False
        print("// cross-checked against hashlib's md2")
    else:
        print("// hashlib has no md2 here: only the RFC 1319 suite checks this script")

    print("// HMAC-MD2 vectors")
    for name, key, msg in HMAC_CASES:
        print("// %s\n%s" % (name, c_bytes(hmac_md2(key, msg))))
    lo, hi = integrity(**INTEGRITY_CASE)
    print("// integrity digest for INTEGRITY_CASE\n{ 0x%016xull, 0x%016xull }" % (lo, hi))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
