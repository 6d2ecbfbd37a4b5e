"""Summarise a MegaTrain log (its examples/sft/train.py's lines).
usage: python parse_log.py LOG --batch-size 158 --seq-len 1024 [--params N] [--json OUT]
Model TFLOP/s = 6 * P * T / step_time, T = batch_size * seq_len tokens per step
(exactly train.py lines 280-283: num_params = all trainable params incl. embedding
and untied lm_head; T counts padded positions).  Steps 2.. are the steady state.
"""
import argparse
import json
import re

# Qwen2.5-7B: embed 152064*3584 + lm_head 152064*3584 + 28 layers * 233,057,792 + final norm 3584
QWEN25_7B_PARAMS = 7_615_616_512

ap = argparse.ArgumentParser()
ap.add_argument("log")
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--seq-len", type=int, required=True)
ap.add_argument("--params", type=int, default=QWEN25_7B_PARAMS)
ap.add_argument("--json", default=None)
a = ap.parse_args()

txt = open(a.log, errors="replace").read()
times = [(float(x), float(y), float(z)) for x, y, z in
         re.findall(r"Time: ([\d.]+)s \| Tokens/s ([\d.]+) \| TFLOPS ([\d.]+)", txt)]
fb = [(float(x), float(y)) for x, y in re.findall(r"FWD: ([\d.]+)s \| BWD: ([\d.]+)s", txt)]
cpu = [float(x) for x in re.findall(r"CPU: ([\d.]+)GB", txt)]
gpu = [float(x) for x in re.findall(r"GPU: ([\d.]+)GB peak", txt)]
T = a.batch_size * a.seq_len
F = 6 * a.params * T
rows = []
for i, (st, tps, their_tflops) in enumerate(times):
    f, b = fb[i] if i < len(fb) else (float("nan"), float("nan"))
    rows.append(dict(step=i + 1, step_s=st, their_tflops=their_tflops,
                     tflops_6PT=F / st / 1e12, fwd_s=f, bwd_s=b,
                     tflops_fwdbwd_only=F / (f + b) / 1e12 if f == f else float("nan"),
                     optimizer_and_rest_s=st - f - b))
out = dict(P=a.params, T=T, flops_per_step=F, steps=rows,
           their_avg_all_steps=(sum(r["their_tflops"] for r in rows) / len(rows)) if rows else None,
           peak_gpu_gb=max(gpu) if gpu else None, peak_cpu_rss_gb=max(cpu) if cpu else None)
steady = rows[1:] if len(rows) > 1 else rows
if steady:
    mean_t = sum(r["step_s"] for r in steady) / len(steady)
    mean_fb = sum(r["fwd_s"] + r["bwd_s"] for r in steady) / len(steady)
    out["steady_steps"] = [r["step"] for r in steady]
    out["steady_step_s"] = mean_t
    out["steady_tflops_6PT"] = F / mean_t / 1e12
    out["steady_tflops_fwdbwd_only"] = F / mean_fb / 1e12
    out["steady_tokens_per_s"] = T / mean_t
print("MEGATRAIN_SUMMARY " + json.dumps(out))
for r in rows:
    print(f"step {r['step']}: {r['step_s']:.2f}s  6PT-TFLOP/s {r['tflops_6PT']:.1f} (log {r['their_tflops']:.1f})"
          f"  fwd {r['fwd_s']:.2f}s bwd {r['bwd_s']:.2f}s  -> fwd+bwd-only {r['tflops_fwdbwd_only']:.1f}"
          f"  optimizer+sync {r['optimizer_and_rest_s']:.2f}s")
if steady:
    print(f"steady (steps {out['steady_steps']}): {out['steady_step_s']:.2f}s/step, "
          f"{out['steady_tflops_6PT']:.1f} model TFLOP/s (6PT), fwd+bwd-only {out['steady_tflops_fwdbwd_only']:.1f}")
if a.json:
    json.dump(out, open(a.json, "w"), indent=1)
