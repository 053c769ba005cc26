#!/usr/bin/env python3
"""Rebuild tiny_models/kjv-12l: a 12-layer LLaMA trained on the King James Bible.

Development tool only (the C/CUDA code never runs Python). Needs the Debian
`bible-kjv` package (the `bible` program) and torch, transformers, tokenizers,
safetensors in the Python environment. CPU only, single thread, seeded.

    python tiny_models/train_kjv.py [--work /work/kjv] [--out tiny_models/kjv-12l]

Stages (all run every time, in order):
  1. corpus    `bible -f Gen1:1-Rev22:21` -> WORK/kjv.tsv (book, chapter, verse,
               text; one verse per line, canonical order). Training text drops
               the verse references: each chapter becomes one document, its
               verses joined by single spaces.
  2. split     held-out validation = whole books (VAL_BOOKS, ~4.8% of the text).
  3. tokenizer SentencePiece-style BPE with byte fallback in the legacy Llama-2
               tokenizer.json shape, vocab 2048, trained on the training split.
  4. train     LlamaForCausalLM (12 layers, d=192, 6 heads, 2 KV heads), fp32,
               AdamW, linear warmup + cosine decay, context 256, batch 16.
               Each chapter is `<s>` + its tokens; the chapters are concatenated
               into one stream and windows of 256 tokens are drawn at random.
               Validation loss every EVAL_EVERY steps on every non-overlapping
               window of the validation stream; the best checkpoint is kept.
  5. save      best checkpoint -> F16 safetensors in HF layout, validation loss
               re-evaluated from the saved file, greedy samples, loss log.
"""
import argparse
import csv
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from tokenizers import (Tokenizer, decoders, models, normalizers,  # noqa: E402
                        pre_tokenizers, processors, trainers)
from transformers import (AutoModelForCausalLM, AutoTokenizer,  # noqa: E402
                          GenerationConfig, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)

SEED = 1234
VOCAB = 2048
CTX = 256
BATCH = 16
MAX_STEPS = 1150
WARMUP = 100
LR_MAX = 1.5e-3
LR_MIN = 1.5e-4
WEIGHT_DECAY = 0.1
BETAS = (0.9, 0.95)
GRAD_CLIP = 1.0
EVAL_EVERY = 100
TIME_LIMIT_S = 65 * 60  # hard stop on training wall-clock; best checkpoint kept

# Book abbreviations as printed by the `bible` program.
VAL_BOOKS = ["Ruth", "Est", "Eccl", "Lam", "Joel", "Jonah", "Hab", "Hag",  # OT
             "Gal", "Phi", "2Tim", "Titus", "Jas", "1Pet", "1Jn", "Jude"]  # NT

SAMPLE_PROMPTS = ["In the beginning God", "And the LORD said unto Moses",
                  "Blessed are the"]

MODEL_CONFIG = dict(
    vocab_size=VOCAB, hidden_size=192, intermediate_size=512,
    num_hidden_layers=12, num_attention_heads=6, num_key_value_heads=2,
    head_dim=32, hidden_act="silu", max_position_embeddings=512,
    rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
    bos_token_id=1, eos_token_id=2, attention_dropout=0.0,
    attention_bias=False, mlp_bias=False, initializer_range=0.02,
)

REF_RE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ---------------------------------------------------------------- corpus ----
def extract_corpus(work):
    raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                         capture_output=True, text=True).stdout
    rows = []
    for line in raw.splitlines():
        m = REF_RE.match(line)
        if not m:
            raise SystemExit(f"unparsed line from bible: {line!r}")
        book, ch, vs, text = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        rows.append((book, ch, vs, " ".join(text.split())))
    assert len(rows) == 31102, len(rows)
    with open(os.path.join(work, "kjv.tsv"), "w") as f:
        for r in rows:
            f.write("%s\t%d\t%d\t%s\n" % r)
    # chapters as documents
    docs = []  # (book, chapter, text)
    for book, ch, _, text in rows:
        if docs and docs[-1][0] == book and docs[-1][1] == ch:
            docs[-1][2].append(text)
        else:
            docs.append((book, ch, [text]))
    docs = [(b, c, " ".join(v)) for b, c, v in docs]
    assert len(docs) == 1189, len(docs)
    books = list(dict.fromkeys(b for b, _, _ in docs))
    assert len(books) == 66 and all(b in books for b in VAL_BOOKS)
    train = [d for d in docs if d[0] not in VAL_BOOKS]
    val = [d for d in docs if d[0] in VAL_BOOKS]
    for name, part in (("train", train), ("val", val)):
        with open(os.path.join(work, f"{name}.txt"), "w") as f:
            for _, _, t in part:
                f.write(t + "\n")
    nt = sum(len(t) for *_, t in train)
    nv = sum(len(t) for *_, t in val)
    log(f"corpus: {len(rows)} verses, {len(docs)} chapters; train {len(train)} "
        f"chapters {nt} chars, val {len(val)} chapters {nv} chars "
        f"({100 * nv / (nt + nv):.1f}%)")
    return train, val, dict(verses=len(rows), chapters=len(docs),
                            train_chapters=len(train), val_chapters=len(val),
                            train_chars=nt, val_chars=nv)


# ------------------------------------------------------------- tokenizer ----
def build_tokenizer(train_docs, out_dir):
    special = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    # Training only: split before every "\u2581" so that no piece spans a word
    # boundary (as SentencePiece's split_by_whitespace). The saved tokenizer
    # has no pre_tokenizer, like Llama-2's; since no merge puts "\u2581"
    # anywhere but at the start of a piece, both give the same tokens.
    tok.pre_tokenizer = pre_tokenizers.Split("\u2581", behavior="merged_with_next")
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=special,
                                  min_frequency=2, show_progress=False)
    tok.train_from_iterator([t for *_, t in train_docs], trainer=trainer)
    spec = json.loads(tok.to_str())
    spec["pre_tokenizer"] = None
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "),
                                     decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1",
        special_tokens=[("<s>", 1)])
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    for i, s in enumerate(special):
        assert tok.token_to_id(s) == i
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>",
                                   model_max_length=1 << 30)
    fast.save_pretrained(out_dir)
    # Legacy Llama-2 file shape: merges as "left right" strings (no piece
    # contains a space), and a tokenizer class older transformers know.
    path = os.path.join(out_dir, "tokenizer.json")
    with open(path) as f:
        spec = json.load(f)
    spec["model"]["merges"] = [m if isinstance(m, str) else " ".join(m)
                               for m in spec["model"]["merges"]]
    assert all(m.count(" ") == 1 for m in spec["model"]["merges"])
    with open(path, "w") as f:
        json.dump(spec, f, indent=2, ensure_ascii=False)
    path = os.path.join(out_dir, "tokenizer_config.json")
    with open(path) as f:
        tcfg = json.load(f)
    tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    tcfg.pop("backend", None)
    with open(path, "w") as f:
        json.dump(tcfg, f, indent=2)
    # the tokenizer as reloaded from disk is the one used from here on
    fast = AutoTokenizer.from_pretrained(out_dir)
    return fast


def check_roundtrip(tok, docs):
    samples = [t for *_, t in docs[:50]] + [
        "In the beginning God created the heaven and the earth.",
        "Hello, w\u00f6rld! 3.14  two  spaces\nnew line \u65e5\u672c \U0001F600",
        " leading space", "trailing space ", "",
    ]
    bad = 0
    for s in samples:
        ids = tok(s, add_special_tokens=False).input_ids
        back = tok.decode(ids)
        if back != s:
            bad += 1
            log(f"round-trip mismatch: {s[:60]!r} -> {back[:60]!r}")
    log(f"tokenizer round-trip: {len(samples) - bad}/{len(samples)} exact")
    s = "In the beginning God created the heaven and the earth."
    log("sample tokens:", tok.convert_ids_to_tokens(tok(s).input_ids))
    return bad


def encode_stream(tok, docs):
    ids = []
    for *_, t in docs:
        ids.extend(tok(t).input_ids)  # <s> + text tokens
    return torch.tensor(ids, dtype=torch.long)


# ----------------------------------------------------------------- train ----
def lr_at(step):
    if step < WARMUP:
        return LR_MAX * (step + 1) / WARMUP
    p = min(1.0, (step - WARMUP) / max(1, MAX_STEPS - WARMUP))
    return LR_MIN + 0.5 * (LR_MAX - LR_MIN) * (1 + math.cos(math.pi * p))


@torch.no_grad()
def evaluate(model, val_ids):
    """Mean next-token loss over all non-overlapping CTX windows of val."""
    model.eval()
    n = (len(val_ids) - 1) // CTX
    x = val_ids[: n * CTX].view(n, CTX)
    y = val_ids[1: n * CTX + 1].view(n, CTX)
    tot, cnt = 0.0, 0
    for i in range(0, n, 32):
        logits = model(input_ids=x[i:i + 32]).logits.float()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), y[i:i + 32].reshape(-1),
            reduction="sum")
        tot += loss.item()
        cnt += y[i:i + 32].numel()
    model.train()
    return tot / cnt


def train(train_ids, val_ids, work):
    torch.manual_seed(SEED)
    cfg = LlamaConfig(**MODEL_CONFIG)
    model = LlamaForCausalLM(cfg)
    nparams = sum(p.numel() for p in model.parameters())
    log(f"model: {nparams} parameters (tied embeddings counted once)")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR_MAX, betas=BETAS, eps=1e-8)
    gen = torch.Generator().manual_seed(SEED)
    hi = len(train_ids) - CTX - 1
    csv_path = os.path.join(work, "loss.csv")
    fcsv = open(csv_path, "w", newline="")
    w = csv.writer(fcsv)
    w.writerow(["step", "tokens_seen", "lr", "train_loss", "val_loss", "elapsed_s"])
    best = (float("inf"), -1)
    best_path = os.path.join(work, "best.pt")
    run_loss, run_n = 0.0, 0
    t0 = time.time()
    rows = []
    stopped = "max_steps"
    for step in range(MAX_STEPS + 1):
        if step % EVAL_EVERY == 0 or step == MAX_STEPS:
            vl = evaluate(model, val_ids)
            tl = run_loss / run_n if run_n else float("nan")
            el = time.time() - t0
            row = [step, step * BATCH * CTX, lr_at(max(step - 1, 0)), tl, vl, el]
            rows.append(row)
            w.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in row])
            fcsv.flush()
            log(f"step {step:5d} train {tl:.4f} val {vl:.4f} "
                f"({el / 60:.1f} min)")
            run_loss, run_n = 0.0, 0
            if vl < best[0]:
                best = (vl, step)
                torch.save(model.state_dict(), best_path)
            if step == MAX_STEPS:
                break
            if el > TIME_LIMIT_S:
                stopped = "time_limit"
                log("time limit reached")
                break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, hi, (BATCH,), generator=gen)
        x = torch.stack([train_ids[s:s + CTX] for s in starts])
        y = torch.stack([train_ids[s + 1:s + CTX + 1] for s in starts])
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        run_loss += loss.item()
        run_n += 1
    fcsv.close()
    train_s = time.time() - t0
    log(f"training done in {train_s / 60:.1f} min; best val {best[0]:.4f} "
        f"at step {best[1]} ({stopped})")
    model.load_state_dict(torch.load(best_path))
    return model, nparams, rows, best, train_s, stopped


# ------------------------------------------------------------------ save ----
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/work/kjv")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "kjv-12l"))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)

    train_docs, val_docs, corpus_info = extract_corpus(args.work)
    tok = build_tokenizer(train_docs, args.out)
    check_roundtrip(tok, val_docs)
    train_ids = encode_stream(tok, train_docs)
    val_ids = encode_stream(tok, val_docs)
    log(f"tokens: train {len(train_ids)}, val {len(val_ids)} "
        f"({corpus_info['train_chars'] / len(train_ids):.2f} chars/token)")

    model, nparams, rows, best, train_s, stopped = train(train_ids, val_ids, args.work)

    model = model.to(torch.float16)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2)
    model.save_pretrained(args.out, safe_serialization=True)
    # transformers 5 writes "rope_parameters" and "dtype"; also write the
    # classic top-level keys that Llama configs on the hub (and readers that
    # parse them) use.
    path = os.path.join(args.out, "config.json")
    with open(path) as f:
        mcfg = json.load(f)
    mcfg["rope_theta"] = MODEL_CONFIG["rope_theta"]
    mcfg["torch_dtype"] = "float16"
    with open(path, "w") as f:
        json.dump(mcfg, f, indent=2, sort_keys=True)
    shutil.copy(os.path.join(args.work, "loss.csv"),
                os.path.join(args.out, "train_loss.csv"))
    del model
    re_model = AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32)
    re_val = evaluate(re_model, val_ids)
    log(f"val loss from saved F16 file (fp32 compute): {re_val:.5f} "
        f"(fp32 checkpoint {best[0]:.5f})")

    samples = []
    for p in SAMPLE_PROMPTS:
        ids = tok(p, return_tensors="pt").input_ids
        out = re_model.generate(ids, max_new_tokens=48, do_sample=False)
        text = tok.decode(out[0], skip_special_tokens=True)
        samples.append((p, text))
        log(f"sample: {text!r}")

    info = dict(corpus=corpus_info, train_tokens=len(train_ids),
                val_tokens=len(val_ids), params=nparams, best_val=best[0],
                best_step=best[1], val_f16=re_val, train_seconds=train_s,
                stopped=stopped, rows=rows, samples=samples,
                machine=f"{platform.processor() or platform.machine()}, "
                        f"torch {torch.__version__}, {args.threads} thread(s)",
                model_bytes=os.path.getsize(os.path.join(args.out, "model.safetensors")))
    with open(os.path.join(args.work, "train_info.json"), "w") as f:
        json.dump(info, f, indent=1)
    log("wrote", os.path.join(args.work, "train_info.json"))


if __name__ == "__main__":
    main()
