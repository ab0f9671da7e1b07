#!/usr/bin/env python3
"""DualPipe's step as the dependency graph its schedule runs, against DeepSeek-V3 Table 2's bubble formula (issue #21).

gpuplan prices DualPipe's bubble with Table 2's closed form, (PP/2 - 1)(F&B + B - 3W) (DeepSeek-V3 technical report,
arXiv:2412.19437), at the slowest device's chunk times. This script lays out the schedule itself: every rank's chunks
in the order deepseek-ai/DualPipe (commit 3da1bbe, dualpipe/dualpipe.py, `DualPipe.step`, steps 1-8) issues them,
each chunk starting when its rank is free and its input has arrived (a forward chunk needs the previous stage's
forward of the same micro-batch, a backward chunk the next stage's backward, the last stage its own forward), an
overlapped F&B chunk needing both. A weight chunk runs the oldest deferred weight-gradient (zero-bubble) part. Each
dependency between ranks can carry a hop delay (a pipeline send that is not hidden). It reports, per rank, the busy
time (the sum of its chunks), the makespan and the idle time (makespan - busy: the bubble as a timeline shows it),
and the count of chunks of each kind (which identifies the device a published breakdown describes).

Chunk times are per stage: --stage-weight S=W scales stage S's forward, backward and weight chunks (and its half of
an overlapped pair) by W, for the end stages that hold the embedding, the heads and the MTP module.

Usage:
  python3 scripts/validation/dualpipe_schedule.py --pp 16 --micro-batches 120 \
      --f 0.0514 --b 0.0780 --w 0.0343 --fb 0.1423 [--fb-forward-share 0.28] [--hop 0.0013] \
      [--stage-weight 0=0.87 --stage-weight 15=1.07]
Times in seconds. Python 3 standard library only.
"""
import argparse
import sys


def rank_ops(rank, pp, m):
    """The chunks rank `rank` runs, in order, as DualPipe.step issues them: ('F', phase), ('B', phase, zb),
    ('W',), ('FB', phase_f, phase_b)."""
    half_ranks = pp // 2
    h = min(rank, pp - 1 - rank)
    half_chunks = m // 2
    middle = rank in (half_ranks - 1, half_ranks)
    ops = []
    ops += [('F', 0)] * ((half_ranks - h - 1) * 2)                      # step 1: nF0
    for _ in range(h + 1):                                               # step 2: nF0F1
        ops += [('F', 0), ('F', 1)]
    for _ in range(half_ranks - h - 1):                                  # step 3: nB1W1F1 (zero bubble)
        ops += [('B', 1, True), ('W',), ('F', 1)]
    for i in range(half_chunks - pp + h + 1):                            # step 4: nF0B1F1B0
        if i == 0 and middle:                                            # "We don't overlap these two chunks"
            ops += [('F', 0), ('B', 1, False)]
        else:
            ops.append(('FB', 0, 1))
        ops.append(('FB', 1, 0))
    for _ in range(half_ranks - h - 1):                                  # step 5: nB1F1B0
        ops += [('B', 1, False), ('FB', 1, 0)]
    zb = False                                                           # step 6: nB1B0
    s6 = h + 1
    for i in range(s6):
        if i == s6 // 2 and h % 2 == 1:
            zb = True
        ops.append(('B', 1, zb))
        if i == s6 // 2 and h % 2 == 0:
            zb = True
        ops.append(('B', 0, zb))
    for _ in range(half_ranks - h - 1):                                  # step 7: nWB0 (zero bubble)
        ops += [('W',), ('B', 0, True)]
    ops += [('W',)] * (h + 1)                                            # step 8: nW
    return ops


def simulate(pp, m, chunk, hop=0.0):
    """chunk(kind, stage_f, stage_b) -> seconds; kind 'F', 'B' (input gradient only), 'W', 'FB' (a forward of
    stage_f beside a full backward of stage_b). Returns (end time per rank, busy per rank, chunk counts per rank)."""
    half_ranks = pp // 2

    def direction(rank, phase):  # direction 0 flows rank 0 -> pp-1, direction 1 back
        return phase if rank < half_ranks else 1 - phase

    def stage(rank, d):
        return rank if d == 0 else pp - 1 - rank

    ops = [rank_ops(r, pp, m) for r in range(pp)]
    f_done, b_done = {}, {}
    f_next = [[0, 0] for _ in range(pp)]
    b_next = [[0, 0] for _ in range(pp)]
    deferred = [[] for _ in range(pp)]
    at = [0] * pp
    t = [0.0] * pp
    busy = [0.0] * pp

    def f_ready(r, d, k):
        s = stage(r, d)
        if s == 0:
            return 0.0
        done = f_done.get((d, s - 1, k))
        return None if done is None else done + hop

    def b_ready(r, d, k):
        s = stage(r, d)
        if s == pp - 1:
            return f_done.get((d, s, k))
        done = b_done.get((d, s + 1, k))
        return None if done is None else done + hop

    moved = True
    while moved:
        moved = False
        for r in range(pp):
            while at[r] < len(ops[r]):
                op = ops[r][at[r]]
                if op[0] == 'F':
                    d = direction(r, op[1])
                    k = f_next[r][d]
                    ready = f_ready(r, d, k)
                    if ready is None:
                        break
                    dur = chunk('F', stage(r, d), None)
                    t[r] = max(t[r], ready) + dur
                    f_done[(d, stage(r, d), k)] = t[r]
                    f_next[r][d] += 1
                elif op[0] == 'B':
                    d = direction(r, op[1])
                    k = b_next[r][d]
                    ready = b_ready(r, d, k)
                    if ready is None:
                        break
                    s = stage(r, d)
                    dur = chunk('B', None, s) + (0.0 if op[2] else chunk('W', None, s))
                    t[r] = max(t[r], ready) + dur
                    b_done[(d, s, k)] = t[r]
                    b_next[r][d] += 1
                    if op[2]:
                        deferred[r].append(s)
                elif op[0] == 'W':
                    s = deferred[r].pop(0)
                    dur = chunk('W', None, s)
                    t[r] += dur
                else:
                    df, db = direction(r, op[1]), direction(r, op[2])
                    kf, kb = f_next[r][df], b_next[r][db]
                    rf, rb = f_ready(r, df, kf), b_ready(r, db, kb)
                    if rf is None or rb is None:
                        break
                    dur = chunk('FB', stage(r, df), stage(r, db))
                    t[r] = max(t[r], rf, rb) + dur
                    f_done[(df, stage(r, df), kf)] = t[r]
                    b_done[(db, stage(r, db), kb)] = t[r]
                    f_next[r][df] += 1
                    b_next[r][db] += 1
                busy[r] += dur
                at[r] += 1
                moved = True
    if any(at[r] != len(ops[r]) for r in range(pp)):
        raise SystemExit("dualpipe_schedule: the schedule deadlocked (a bug in the layout)")
    counts = []
    for r in range(pp):
        c = {'F alone': 0, 'B alone': 0, 'W': 0, 'F&B': 0}
        for op in ops[r]:
            c[{'F': 'F alone', 'B': 'B alone', 'W': 'W', 'FB': 'F&B'}[op[0]]] += 1
        counts.append(c)
    return t, busy, counts


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pp", type=int, default=16)
    ap.add_argument("--micro-batches", type=int, default=120)
    ap.add_argument("--f", type=float, required=True, help="a forward chunk run alone (s)")
    ap.add_argument("--b", type=float, required=True, help="a backward chunk's input-gradient part run alone (s)")
    ap.add_argument("--w", type=float, required=True, help="its weight-gradient part (s)")
    ap.add_argument("--fb", type=float, required=True, help="an overlapped forward + full backward pair (s)")
    ap.add_argument("--fb-forward-share", type=float, default=0.28,
                    help="the forward's share of a pair, for stage weights (default 0.28)")
    ap.add_argument("--hop", type=float, default=0.0, help="delay on every dependency between ranks (s)")
    ap.add_argument("--stage-weight", action="append", default=[], metavar="S=W")
    args = ap.parse_args(argv)
    pp, m = args.pp, args.micro_batches
    if pp < 2 or pp % 2 or m % 2 or m < 2 * pp:
        ap.error("DualPipe needs PP even, micro-batches even and at least 2·PP")
    weight = [1.0] * pp
    for sw in args.stage_weight:
        s, w = sw.split("=")
        weight[int(s)] = float(w)

    def chunk(kind, sf, sb):
        if kind == 'FB':
            return args.fb * (args.fb_forward_share * weight[sf] + (1.0 - args.fb_forward_share) * weight[sb])
        s = sf if kind == 'F' else sb
        return {'F': args.f, 'B': args.b, 'W': args.w}[kind] * weight[s]

    t, busy, counts = simulate(pp, m, chunk, args.hop)
    span = max(t)
    print(f"PP {pp}, {m} micro-batches, hop {args.hop * 1e3:.2f} ms; makespan {span:.3f} s")
    print("rank  busy (s)  idle (s)  F alone  B alone   W  F&B")
    for r in range(pp):
        c = counts[r]
        print(f"{r:4d}  {busy[r]:8.3f}  {span - busy[r]:8.3f}  {c['F alone']:7d}  {c['B alone']:7d}  {c['W']:2d}  "
              f"{c['F&B']:3d}")
    worst = max(range(pp), key=lambda r: busy[r])
    formula = (pp / 2 - 1) * (args.fb + args.b + args.w - 3 * args.w)
    print(f"busiest rank {worst}: idle {span - busy[worst]:.3f} s; "
          f"Table 2's (PP/2 - 1)(F&B + B - 3W) at the same chunks (B the full backward): {formula:.3f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
