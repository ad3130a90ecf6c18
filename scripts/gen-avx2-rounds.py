#!/usr/bin/env python3
"""Write p2p-conn/src/proto/aead/multiframe/avx2_rounds.rs: the AVX2
kernel's double round as one `asm!` block, alone and with four Poly1305
blocks stitched into it.

Usage: scripts/gen-avx2-rounds.py [--check]

--check fails (exit 1) when the committed file differs from what this
script writes (CI runs it in the `lint` stage).

Why generated: the instructions of a stitched double round are two
programs merged instruction by instruction (eight ChaCha20 lanes on the
vector units, two Poly1305 accumulators on the integer units), and the
register plan is the same throughout. Written by hand, a change to either
program means re-merging 270 lines.

Register plan (Intel syntax):
* ymm: rows a (4), b (4) and d (4) of the state and two words of row c;
  the other two words of row c wait in the scratch area, swapped after
  the first and the third pair of quarter rounds (OpenSSL's 8-block AVX2
  ChaCha20 does the same); two temporaries.
* general registers: the two lanes' accumulators (3 each), the message
  pointer, the scratch pointer, rdx (`mulx`'s implicit factor), rax and
  three temporaries: the thirteen registers `asm!` may use.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "p2p-conn/src/proto/aead/multiframe/avx2_rounds.rs")

# Scratch layout (`Scratch` in avx2.rs): masks, the four row-c slots, r.
ROT16, ROT8, CSLOT, RA, RB = 0, 32, 64, 192, 216
SEALED_LEN = 1044


def qr_pair(w0, w1):
    """Two quarter rounds, instructions alternating. Each w is
    (a, b, c, d) operand names."""
    out = []

    def both(fmt):
        for (a, b, c, d), t in ((w0, "t0"), (w1, "t1")):
            out.append(fmt.format(a=a, b=b, c=c, d=d, t=t))

    for rot_d, (sl, sr) in ((ROT16, (12, 20)), (ROT8, (7, 25))):
        both("vpaddd {{{a}}}, {{{a}}}, {{{b}}}")
        both("vpxor {{{d}}}, {{{d}}}, {{{a}}}")
        both("vpshufb {{{d}}}, {{{d}}}, ymmword ptr [{{st}} + %d]" % rot_d)
        both("vpaddd {{{c}}}, {{{c}}}, {{{d}}}")
        both("vpxor {{{b}}}, {{{b}}}, {{{c}}}")
        both("vpslld {{{t}}}, {{{b}}}, %d" % sl)
        both("vpsrld {{{b}}}, {{{b}}}, %d" % sr)
        both("vpor {{{b}}}, {{{b}}}, {{{t}}}")
    return out


def swap(out_words, in_words):
    """Store the c words in registers c0, c1 to their slots, load two
    others into them."""
    s = []
    for reg, w in zip(("c0", "c1"), out_words):
        s.append("vmovdqu ymmword ptr [{st} + %d], {%s}" % (CSLOT + 32 * w, reg))
    for reg, w in zip(("c0", "c1"), in_words):
        s.append("vmovdqu {%s}, ymmword ptr [{st} + %d]" % (reg, CSLOT + 32 * w))
    return s


def vector_pairs():
    """The double round as four pieces, one per quarter-round pair; the
    row-c swaps ride at the end of the first and the third."""
    return [
        qr_pair(("a0", "b0", "c0", "d0"), ("a1", "b1", "c1", "d1")) + swap((0, 1), (2, 3)),
        qr_pair(("a2", "b2", "c0", "d2"), ("a3", "b3", "c1", "d3")),
        qr_pair(("a0", "b1", "c0", "d3"), ("a1", "b2", "c1", "d0")) + swap((2, 3), (0, 1)),
        qr_pair(("a2", "b3", "c0", "d1"), ("a3", "b0", "c1", "d2")),
    ]


def poly_block(h, msg, r):
    """One Poly1305 block, radix 2^64: h = (h + m + 2^128) * r, partly
    reduced; the same operations and bounds as `block` in avx2.rs. h is a
    triple of operand names, msg the message's address, r the address of
    [r0, r1, 5 * r1 / 4]."""
    h0, h1, h2 = ("{%s}" % x for x in h)
    return [
        f"add {h0}, qword ptr [{msg}]",
        f"adc {h1}, qword ptr [{msg} + 8]",
        f"adc {h2}, 1",
        f"mov rdx, qword ptr [{r}]",  # r0
        f"mulx {{g2}}, {{g1}}, {h1}",  # h1 * r0
        f"mulx {{g3}}, rax, {h0}",  # h0 * r0
        f"mov rdx, qword ptr [{r} + 8]",  # r1
        f"mulx rdx, {h0}, {h0}",  # h0 * r1
        f"add {{g1}}, {h0}",
        "adc {g2}, rdx",
        f"mov rdx, qword ptr [{r} + 16]",  # s1
        f"mulx rdx, {h0}, {h1}",  # h1 * s1
        f"add rax, {h0}",
        "adc {g3}, rdx",  # d0 = g3:rax
        f"mov {h1}, {h2}",
        f"imul {h1}, qword ptr [{r} + 16]",  # h2 * s1
        f"imul {h2}, qword ptr [{r}]",  # h2 * r0
        f"add {{g1}}, {h1}",
        "adc {g2}, 0",  # d1 = g2:g1
        "add {g1}, {g3}",
        f"adc {h2}, {{g2}}",  # d2
        f"mov {h0}, rax",
        f"mov {h1}, {{g1}}",
        f"mov rax, {h2}",
        "and rax, -4",
        f"mov {{g1}}, {h2}",
        "shr {g1}, 2",
        f"and {h2}, 3",
        "add rax, {g1}",  # 5 * (d2 >> 2)
        f"add {h0}, rax",
        f"adc {h1}, 0",
        f"adc {h2}, 0",
    ]


def merge(vec, scal):
    """Vector and scalar instructions interleaved evenly, each list in its
    own order (the scalar add/adc pairs stay adjacent: no vector
    instruction touches the flags)."""
    keyed = [(i / len(vec), 0, x) for i, x in enumerate(vec)]
    keyed += [((i + 0.5) / len(scal), 1, x) for i, x in enumerate(scal)]
    return [x for _, _, x in sorted(keyed, key=lambda k: (k[0], k[1]))]


def stitched():
    polys = [
        poly_block(("ha0", "ha1", "ha2"), "{pm}", "{st} + %d" % RA),
        poly_block(("hb0", "hb1", "hb2"), "{pm} + %d" % SEALED_LEN, "{st} + %d" % RB),
        poly_block(("ha0", "ha1", "ha2"), "{pm} + 16", "{st} + %d" % RA),
        poly_block(("hb0", "hb1", "hb2"), "{pm} + %d" % (SEALED_LEN + 16), "{st} + %d" % RB),
    ]
    out = []
    for v, p in zip(vector_pairs(), polys):
        out += merge(v, p)
    return out


def plain():
    return [x for v in vector_pairs() for x in v]


YMM = """                a0 = inout(ymm_reg) $x[0],
                a1 = inout(ymm_reg) $x[1],
                a2 = inout(ymm_reg) $x[2],
                a3 = inout(ymm_reg) $x[3],
                b0 = inout(ymm_reg) $x[4],
                b1 = inout(ymm_reg) $x[5],
                b2 = inout(ymm_reg) $x[6],
                b3 = inout(ymm_reg) $x[7],
                c0 = inout(ymm_reg) $x[8],
                c1 = inout(ymm_reg) $x[9],
                d0 = inout(ymm_reg) $x[12],
                d1 = inout(ymm_reg) $x[13],
                d2 = inout(ymm_reg) $x[14],
                d3 = inout(ymm_reg) $x[15],
                t0 = out(ymm_reg) _,
                t1 = out(ymm_reg) _,
                st = in(reg) $st,
"""

GPR = """                ha0 = inout(reg) $ha[0],
                ha1 = inout(reg) $ha[1],
                ha2 = inout(reg) $ha[2],
                hb0 = inout(reg) $hb[0],
                hb1 = inout(reg) $hb[1],
                hb2 = inout(reg) $hb[2],
                pm = in(reg) $pm,
                g1 = out(reg) _,
                g2 = out(reg) _,
                g3 = out(reg) _,
                out("rax") _,
                out("rdx") _,
"""


def asm_lines(lines):
    return "".join('                "%s",\n' % line for line in lines)


def render():
    return f"""// @generated by scripts/gen-avx2-rounds.py: edit that script, not this
// file (CI checks that they agree).
//
// The AVX2 kernel's double round (avx2.rs) as one `asm!` block each:
// `plain_double_round!` and `stitched_double_round!`, the latter with
// four Poly1305 blocks (two of lane a, two of lane b) merged into it.
//
// Operands: `$x` the sixteen state words as `__m256i` (words 10 and 11
// are not read or written: they wait in `$st`'s row-c slots 2 and 3, as
// words 8 and 9 do between the swaps inside); `$st` a pointer to the
// kernel's `Scratch` (rotation masks at 0 and 32, row-c slots at 64,
// lane a's `[r0, r1, s1]` at {RA}, lane b's at {RB}); `$pm` a pointer to
// lane a's message blocks (lane b's are {SEALED_LEN} bytes further); `$ha`
// and `$hb` the lanes' accumulators as `[u64; 3]`.

/// One ChaCha20 double round over the eight lanes in `$x`.
macro_rules! plain_double_round {{
    ($x:ident, $st:expr) => {{
        // SAFETY: AVX2 instructions only, reached only from `kernel`,
        // whose caller proved AVX2 (avx2.rs's module docs). Memory: `$st`'s
        // `Scratch`, which the kernel owns (masks read, row-c slots read
        // and written). No stack use; flags untouched.
        unsafe {{
            core::arch::asm!(
{asm_lines(plain())}{YMM}                options(nostack, preserves_flags),
            )
        }}
    }};
}}

/// One ChaCha20 double round over the eight lanes in `$x`, with the
/// Poly1305 blocks at `$pm` and `$pm + 16` of lane a (accumulator `$ha`)
/// and at the same offsets {SEALED_LEN} bytes on of lane b (`$hb`).
macro_rules! stitched_double_round {{
    ($x:ident, $st:expr, $pm:expr, $ha:ident, $hb:ident) => {{
        // SAFETY: as `plain_double_round!`, plus `mulx`/`imul`/`add` on
        // general registers (flags clobbered) and reads of 32 bytes at
        // `$pm` and at `$pm + {SEALED_LEN}`, which the kernel derives from
        // whole 64-byte chunks of the half-group it holds (avx2.rs).
        unsafe {{
            core::arch::asm!(
{asm_lines(stitched())}{YMM}{GPR}                options(nostack),
            )
        }}
    }};
}}
"""


def main():
    text = render()
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            if f.read() != text:
                print(f"{OUT} differs: run scripts/gen-avx2-rounds.py", file=sys.stderr)
                sys.exit(1)
        return
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
