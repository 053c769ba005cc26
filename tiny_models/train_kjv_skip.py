#!/usr/bin/env python3
"""Train tiny_models/kjv-12l-skip: kjv-12l's architecture, data and tokenizer, trained with
sublayer dropout rising with depth, so that skipping sublayers barely changes the output.

Development tool only (the C/CUDA code never runs Python). Needs what train_kjv.py needs
(the Debian `bible-kjv` package, torch, transformers, tokenizers, safetensors) and the
committed tokenizer of tiny_models/kjv-12l, which it reuses so that both models share token
ids. CPU, one thread, seeded.

    python tiny_models/train_kjv_skip.py [--work /work/kjv-skip] [--out tiny_models/kjv-12l-skip]
    python tiny_models/train_kjv_skip.py --time-steps 10     # seconds per step, then exit

The recipe, after LayerSkip (Elhoushi et al. 2024, Sec. 4.1), and where it differs:
- LayerSkip drops whole layers with p(l, t) = S(t) D(l) p_max, rising with depth l. selfspec's
  drafts skip sublayers, so here each attention and each MLP sublayer is dropped on its own,
  with p(l) = P_MAX * l / (L - 1): 0 for layer 0 (its MLP acts as a second embedding and no
  method skips it) rising linearly to P_MAX for the last layer. LayerSkip's D(l) rises
  exponentially; the linear rise gives the middle layers, which the papers' methods skip most,
  higher rates. No rate scaling over time (LayerSkip's S(t) for training from scratch): the
  rates hold from the first step.
- A dropped sublayer is an exact residual pass-through (h + 0), which is what selfspec's
  drafts compute; no 1/(1-p) rescaling as in classic dropout or stochastic depth.
- One mask per micro-batch of 4 sequences (LayerSkip: per sample), so a dropped sublayer is
  not computed at all: the saved time buys more steps on a CPU.
- One micro-batch in four runs the full model: the full model is what verifies, and its
  output must stay what it would be without dropout training.
- No early-exit loss: selfspec drafts by skipping sublayers, never by exiting early.

Stage 2, self-distillation (not in LayerSkip): continued from stage 1's best checkpoint, each
micro-batch runs the full model (its cross-entropy keeps the full model's quality) and the same
tokens with a random dropout mask drawn as above, whose output is pulled toward the full model's
by KL(full || skipped), the full model's distribution held fixed. Acceptance is agreement with
the full model, which LayerSkip's loss on the data alone does not ask for; this does. Stage 2's
mask rates are S2_P_MAX per the same linear schedule.

Stage 3, self-distillation on the middle layers (not in LayerSkip): stage 2 as run did not raise
agreement (top-1 agreement of the demo's set with the full model 0.58 -> 0.57, KL flat at 0.31):
its masks drop the last layers' sublayers most (p = 0.8 for layer 11), which no method skips,
and the loss went to what cannot be learned. Stage 3 draws masks like the methods' sets: layers
1 to L-2 only, every sublayer there dropped with one rate q ~ U(S3_Q_MIN, S3_Q_MAX) drawn per
micro-batch (6 to 12 of the 20 middle sublayers), the loss as in stage 2.
"""
import argparse
import csv
import json
import math
import os
import platform
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_kjv as base  # noqa: E402  corpus, split, evaluation, model config

import torch  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoTokenizer,  # noqa: E402
                          GenerationConfig, LlamaConfig, LlamaForCausalLM)

SEED = 4321
MAX_STEPS = 2600
WARMUP = 100
MICRO = 4                 # sequences per micro-batch; base.BATCH / MICRO micro-batches a step
P_MAX = 0.5               # drop rate of the last layer's sublayers
EVAL_EVERY = 260
S2_STEPS = 700           # stage 2 (self-distillation) steps
S2_LR_MAX, S2_LR_MIN, S2_WARMUP = 3e-4, 3e-5, 20
S2_P_MAX = 0.8
S2_EVAL_EVERY = 175
S3_STEPS, S3_LR_MAX, S3_EVAL_EVERY = 500, 3e-4, 100  # stage 3 (middle-layer distillation)
S3_Q_MIN, S3_Q_MAX = 0.3, 0.6
# sets measured at each stage-2 evaluation (top-1 agreement with the full model), never trained on
WATCH = {"demo 9/24": ({2, 4, 6, 8, 10}, {3, 5, 7, 9}),
         "12/24": ({2, 3, 4, 5, 6, 7, 8, 9}, {3, 5, 7, 9})}
HERE = os.path.dirname(os.path.abspath(__file__))

# which sublayers the current micro-batch drops: DROP["attn"][l], DROP["mlp"][l]
DROP = {"attn": [], "mlp": []}


def drop_rate(layer, n_layers, p_max=None):
    return (P_MAX if p_max is None else p_max) * layer / (n_layers - 1)


def make_droppable(model):
    """Wrap each sublayer's forward: while DROP says so it returns zeros, so the decoder
    layer's `residual + sublayer(norm(h))` is the residual alone."""
    for i, layer in enumerate(model.model.layers):
        def attn(*a, _f=layer.self_attn.forward, _i=i, **k):
            if DROP["attn"][_i]:
                return torch.zeros_like(k["hidden_states"]), None
            return _f(*a, **k)

        def mlp(x, _f=layer.mlp.forward, _i=i):
            return torch.zeros_like(x) if DROP["mlp"][_i] else _f(x)
        layer.self_attn.forward = attn
        layer.mlp.forward = mlp
    n = len(model.model.layers)
    DROP["attn"] = [False] * n
    DROP["mlp"] = [False] * n


def set_drops(n_layers, gen, full, p_max=None):
    for kind in ("attn", "mlp"):
        DROP[kind] = [False if full else
                      bool(torch.rand((), generator=gen) < drop_rate(l, n_layers, p_max))
                      for l in range(n_layers)]


def set_middle_drops(n_layers, gen):
    """Stage 3's mask: sublayers of layers 1..L-2 dropped with one rate q drawn per call."""
    q = S3_Q_MIN + (S3_Q_MAX - S3_Q_MIN) * torch.rand((), generator=gen).item()
    for kind in ("attn", "mlp"):
        DROP[kind] = [0 < l < n_layers - 1 and bool(torch.rand((), generator=gen) < q)
                      for l in range(n_layers)]


@torch.no_grad()
def agreement(model, val_ids, attn, mlp, n_windows=8):
    """Top-1 agreement of the model skipping (attn, mlp) with the full model on the first
    n_windows CTX-token windows of the validation stream."""
    model.eval()
    x = val_ids[: n_windows * base.CTX].view(n_windows, base.CTX)
    n = len(model.model.layers)
    DROP["attn"], DROP["mlp"] = [False] * n, [False] * n
    full = model(input_ids=x).logits.argmax(-1)
    DROP["attn"] = [l in attn for l in range(n)]
    DROP["mlp"] = [l in mlp for l in range(n)]
    skip = model(input_ids=x).logits.argmax(-1)
    DROP["attn"], DROP["mlp"] = [False] * n, [False] * n
    model.train()
    return (full == skip).float().mean().item()


def distill(model, train_ids, val_ids, work, gen, stage=2):
    """Stages 2 and 3: full-model cross-entropy + KL(full || skipped), one mask per micro-batch."""
    steps, lr_max, every = (S2_STEPS, S2_LR_MAX, S2_EVAL_EVERY) if stage == 2 else \
        (S3_STEPS, S3_LR_MAX, S3_EVAL_EVERY)
    n_layers = len(model.model.layers)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": base.WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr_max, betas=base.BETAS, eps=1e-8)
    hi = len(train_ids) - base.CTX - 1
    n_micro = base.BATCH // MICRO
    rows, best, t0 = [], (float("inf"), -1), time.time()
    best_path = os.path.join(work, f"best_s{stage}.pt")
    run_ce = run_kl = 0.0
    for step in range(steps + 1):
        if step % every == 0 or step == steps:
            set_drops(n_layers, gen, full=True)
            vl = base.evaluate(model, val_ids)
            agree = {k: agreement(model, val_ids, a, m) for k, (a, m) in WATCH.items()}
            el = time.time() - t0
            k = max(1, step % every or every) if step else 1
            rows.append([step, vl, run_ce / k, run_kl / k, el] + list(agree.values()))
            base.log(f"stage {stage} step {step:4d} val {vl:.4f} ce {run_ce / k:.4f} kl {run_kl / k:.4f} "
                     + " ".join(f"{n} {v:.3f}" for n, v in agree.items()) + f" ({el / 60:.1f} min)")
            run_ce = run_kl = 0.0
            # keep the last checkpoint: the stage trades a little loss for agreement on purpose
            torch.save(model.state_dict(), best_path)
            best = (vl, step)
            if step == steps:
                break
        lr = (lr_max * (step + 1) / S2_WARMUP if step < S2_WARMUP else
              S2_LR_MIN + 0.5 * (lr_max - S2_LR_MIN) *
              (1 + math.cos(math.pi * (step - S2_WARMUP) / (steps - S2_WARMUP))))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, hi, (base.BATCH,), generator=gen)
        opt.zero_grad(set_to_none=True)
        for m in range(n_micro):
            s = starts[m * MICRO:(m + 1) * MICRO]
            x = torch.stack([train_ids[i:i + base.CTX] for i in s])
            y = torch.stack([train_ids[i + 1:i + base.CTX + 1] for i in s])
            set_drops(n_layers, gen, full=True)
            full = model(input_ids=x).logits
            ce = torch.nn.functional.cross_entropy(full.reshape(-1, full.size(-1)), y.reshape(-1))
            if stage == 2:
                set_drops(n_layers, gen, full=False, p_max=S2_P_MAX)
            else:
                set_middle_drops(n_layers, gen)
            skip = model(input_ids=x).logits
            target = torch.log_softmax(full.detach().float(), -1)
            kl = torch.nn.functional.kl_div(torch.log_softmax(skip.float(), -1).reshape(-1, skip.size(-1)),
                                            target.reshape(-1, target.size(-1)),
                                            log_target=True, reduction="batchmean")
            ((ce + kl) / n_micro).backward()
            run_ce += ce.item() / n_micro
            run_kl += kl.item() / n_micro
        torch.nn.utils.clip_grad_norm_(model.parameters(), base.GRAD_CLIP)
        opt.step()
    set_drops(n_layers, gen, full=True)
    with open(os.path.join(work, f"loss_s{stage}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "val_loss", "ce", "kl", "elapsed_s"] + list(WATCH))
        for r in rows:
            w.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in r])
    return rows, time.time() - t0


def lr_at(step):
    if step < WARMUP:
        return base.LR_MAX * (step + 1) / WARMUP
    p = min(1.0, (step - WARMUP) / max(1, MAX_STEPS - WARMUP))
    return base.LR_MIN + 0.5 * (base.LR_MAX - base.LR_MIN) * (1 + math.cos(math.pi * p))


def train(train_ids, val_ids, work, time_steps):
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**base.MODEL_CONFIG))
    make_droppable(model)
    n_layers = len(model.model.layers)
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": base.WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=base.LR_MAX, betas=base.BETAS, eps=1e-8)
    gen = torch.Generator().manual_seed(SEED)
    hi = len(train_ids) - base.CTX - 1
    fcsv = open(os.path.join(work, "loss.csv"), "w", newline="")
    w = csv.writer(fcsv)
    w.writerow(["step", "tokens_seen", "lr", "train_loss", "val_loss", "elapsed_s"])
    best = (float("inf"), -1)
    best_path = os.path.join(work, "best.pt")
    run_loss, run_n, rows = 0.0, 0, []
    t0 = time.time()
    n_micro = base.BATCH // MICRO
    for step in range(MAX_STEPS + 1):
        if time_steps and step == time_steps:
            print(f"{(time.time() - t0) / time_steps:.3f} s/step")
            return None
        if not time_steps and (step % EVAL_EVERY == 0 or step == MAX_STEPS):
            set_drops(n_layers, gen, full=True)
            vl = base.evaluate(model, val_ids)
            tl = run_loss / run_n if run_n else float("nan")
            el = time.time() - t0
            row = [step, step * base.BATCH * base.CTX, lr_at(max(step - 1, 0)), tl, vl, el]
            rows.append(row)
            w.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in row])
            fcsv.flush()
            base.log(f"step {step:5d} train {tl:.4f} val {vl:.4f} ({el / 60:.1f} min)")
            run_loss, run_n = 0.0, 0
            if vl < best[0]:
                best = (vl, step)
                torch.save(model.state_dict(), best_path)
            if step == MAX_STEPS:
                break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, hi, (base.BATCH,), generator=gen)
        opt.zero_grad(set_to_none=True)
        for m in range(n_micro):
            set_drops(n_layers, gen, full=(m == 0))
            s = starts[m * MICRO:(m + 1) * MICRO]
            x = torch.stack([train_ids[i:i + base.CTX] for i in s])
            y = torch.stack([train_ids[i + 1:i + base.CTX + 1] for i in s])
            logits = model(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            (loss / n_micro).backward()
            run_loss += loss.item() / n_micro
        run_n += 1
        torch.nn.utils.clip_grad_norm_(model.parameters(), base.GRAD_CLIP)
        opt.step()
    fcsv.close()
    train_s = time.time() - t0
    base.log(f"training done in {train_s / 60:.1f} min; best val {best[0]:.4f} at step {best[1]}")
    set_drops(n_layers, gen, full=True)
    model.load_state_dict(torch.load(best_path))
    return model, nparams, rows, best, train_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/work/kjv-skip")
    ap.add_argument("--out", default=os.path.join(HERE, "kjv-12l-skip"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "kjv-12l"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time-steps", type=int, default=0)
    ap.add_argument("--stage2-from", metavar="PT",
                    help="skip stage 1 and start stage 2 from this checkpoint (stage 1's best.pt)")
    ap.add_argument("--stage3-from", metavar="DIR",
                    help="run stage 3 only, from this saved model (stage 2's output folder)")
    ap.add_argument("--s2-steps", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)

    train_docs, val_docs, corpus_info = base.extract_corpus(args.work)
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    train_ids = base.encode_stream(tok, train_docs)
    val_ids = base.encode_stream(tok, val_docs)
    base.log(f"tokens: train {len(train_ids)}, val {len(val_ids)}")
    s2_rows = s2_s = None
    if args.stage3_from:
        model = AutoModelForCausalLM.from_pretrained(args.stage3_from, dtype=torch.float32)
        make_droppable(model)
        nparams = sum(p.numel() for p in model.parameters())
        rows, best, train_s = [], (None, None), None
    elif args.stage2_from:
        model = LlamaForCausalLM(LlamaConfig(**base.MODEL_CONFIG))
        make_droppable(model)
        model.load_state_dict(torch.load(args.stage2_from))
        nparams = sum(p.numel() for p in model.parameters())
        rows, best, train_s = [], (None, None), None
    else:
        got = train(train_ids, val_ids, args.work, args.time_steps)
        if got is None:
            return
        model, nparams, rows, best, train_s = got
    if args.s2_steps:  # a quick check of the script, not the recipe
        globals()["S2_STEPS"] = args.s2_steps
    # stage 2 draws from its own generator, so a run resumed with --stage2-from is the same run
    if not args.stage3_from:
        s2_rows, s2_s = distill(model, train_ids, val_ids, args.work,
                                torch.Generator().manual_seed(SEED + 1))
    s3_rows, s3_s = distill(model, train_ids, val_ids, args.work,
                            torch.Generator().manual_seed(SEED + 2), stage=3)

    os.makedirs(args.out, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer, f), os.path.join(args.out, f))
    model = model.to(torch.float16)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2)
    model.save_pretrained(args.out, safe_serialization=True)
    path = os.path.join(args.out, "config.json")
    with open(path) as f:
        mcfg = json.load(f)
    mcfg["rope_theta"] = base.MODEL_CONFIG["rope_theta"]
    mcfg["torch_dtype"] = "float16"
    with open(path, "w") as f:
        json.dump(mcfg, f, indent=2, sort_keys=True)
    for name in ("loss.csv", "loss_s2.csv", "loss_s3.csv"):
        if os.path.exists(os.path.join(args.work, name)):
            shutil.copy(os.path.join(args.work, name),
                        os.path.join(args.out, "train_" + name))
    del model
    re_model = AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32)
    re_val = base.evaluate(re_model, val_ids)
    base.log(f"val loss from saved F16 file (fp32 compute): {re_val:.5f} "
             f"(stage 3's last checkpoint {s3_rows[-1][1]:.5f})")
    info = dict(params=nparams, best_val=best[0], best_step=best[1], val_f16=re_val,
                train_seconds=train_s, rows=rows, seed=SEED, max_steps=MAX_STEPS,
                stage2_seconds=s2_s, stage2_rows=s2_rows, stage2_steps=S2_STEPS,
                stage3_seconds=s3_s, stage3_rows=s3_rows, stage3_steps=S3_STEPS,
                p_max=P_MAX, micro=MICRO,
                machine=f"{platform.processor() or platform.machine()}, "
                        f"torch {torch.__version__}, {args.threads} thread(s)")
    with open(os.path.join(args.work, "train_info.json"), "w") as f:
        json.dump(info, f, indent=1)
    base.log("wrote", os.path.join(args.work, "train_info.json"))


if __name__ == "__main__":
    main()
