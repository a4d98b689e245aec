"""Hostile-suite classes from issue 35 (the third sweep), added to the suite by hostile_test.py:

  outputs   output paths that are devices, FIFOs, directories or symlinks (convert -o, logits --output): refused with
            one line, or written through as a shell redirection would, and never replaced by a regular file (each
            case checks the path afterwards, not only the exit status)
  zerodim   GGUF tensors with a dimension of 0 and GGUF sizes of 0 (they reached integer divisions: SIGFPE)
  nesting   recursive structures a file controls, nested past their bound: tokenizer.json Sequence components,
            JSON nesting of every JSON file, GGUF arrays of arrays, chat-template blocks
  internal  input that used to escape as "internal error (a bug in pipit)": invalid UTF-8 in tokenizer files,
            wrong-typed fields in a .pipit header
  floats    config floats that made every logit NaN (rope_theta 0 / -1 / 1e-300, negative eps, soft-caps, scales)
  stdout    run, tokenize, inspect, template, bench with stdout on /dev/full: exit 1, not 0
  sidefiles tokenizer_config.json, generation_config.json, chat_template.jinja, tokenizer.json that are a
            directory, a FIFO or a device: an error naming the file, not silently ignored
  schemas   JSON schemas and grammars whose compilation was superlinear (an enum of 8k values 9 s, 10k optional
            properties 54 s, a left-reference chain deep enough for a recursive search): each compiles in a few
            seconds, and a left-recursive chain is an error, not a stack overflow
  jpeg      a progressive JPEG with thousands of scans (each a pass over every coefficient: 20,000 empty scans
            decoded for 17 s): refused past 1000 scans, naming the cause
  wrong     results that were wrong without a word: a template's range() whose count overflowed ("out of memory"
            for range(0, 2**63-1, 2**62), which has 2 items), `tokenize --decode` of ids outside the vocabulary
            (dropped silently; now an error naming the id)
  unicode   NFC of a long run of combining marks (utf8proc orders them by neighbour exchanges: 40k marks 5.5 s,
            quadratic): tokenized within a few seconds
  streams   inputs that never end or never open (issue 35.10): `--recipe /dev/zero` (read 1.1 GB), JSONL input on
            /dev/zero or one endless line (tokenize / template --jsonl kept one line of gigabytes), a weights file or
            shard that is a FIFO nobody writes (the open waited for ever), a GGUF whose chat template is 10 MB.
            Stream inputs (-f, --jsonl, stdin) that are pipes are read as pipes, waiting for their writer as `cat`
            does; files that must be mapped or sniffed (weights, shards) are refused unless regular
Every case runs under the suite's time and RSS bounds.
"""
import json
import os
import stat
import struct

import make_seeds  # noqa: E402  (the GGUF writer; hostile_test.py puts tests/fuzz on the path)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return path


# ---- outputs (issue 35.1) ----

def kind(path):
    """What `path` is now, without following a link: 'link', 'chr', 'blk', 'fifo', 'dir', 'file', 'absent'."""
    try:
        m = os.lstat(path).st_mode
    except FileNotFoundError:
        return "absent"
    for name, test in [("link", stat.S_ISLNK), ("chr", stat.S_ISCHR), ("blk", stat.S_ISBLK), ("fifo", stat.S_ISFIFO),
                       ("dir", stat.S_ISDIR), ("file", stat.S_ISREG)]:
        if test(m):
            return name
    return "other"


def stays(path, what, content=None):
    """A check that `path` is still `what` after the run (and a regular file's bytes unchanged)."""
    def check():
        now = kind(path)
        if now != what:
            return "%s is now %s, was %s" % (path, now, what)
        if content is not None and open(path, "rb").read() != content:
            return "%s was changed" % path
        return ""
    return check


def is_pipit_at(path, link=None):
    """After a successful convert: `path` holds a .pipit file, and `link` (when given) is still a symlink to it."""
    def check():
        if link is not None and kind(link) != "link":
            return "the symlink %s was replaced by %s" % (link, kind(link))
        with open(path, "rb") as f:
            head = f.read(8)
        return "" if head.startswith(b"PIPIT") else "%s does not hold a .pipit file: %r" % (path, head)
    return check


def output_cases(s, inp):
    """convert -o (renames a new file onto the path) and logits --output (writes into the path) on every kind of
    path. As root the device nodes are made here (mknod), never the real ones in /dev; without root those cases
    are left out and the FIFO, directory and link cases still run."""
    d = s.fresh("outputs")
    root = os.geteuid() == 0
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    sub = os.path.join(d, "dir")
    os.makedirs(sub)
    targets = [("a FIFO", fifo, "fifo"), ("a directory", sub, "dir")]
    if root:
        try:
            chr_dev = os.path.join(d, "null_clone")
            os.mknod(chr_dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
            targets.append(("a character device", chr_dev, "chr"))
            # a block device of a major number no driver has (240-254: local use): never a real disk, even if a
            # bug opened it
            blk_dev = os.path.join(d, "loop_clone")
            os.mknod(blk_dev, stat.S_IFBLK | 0o600, os.makedev(240, 0))
            targets.append(("a block device", blk_dev, "blk"))
        except PermissionError:  # a container without CAP_MKNOD: the FIFO, directory and link cases still run
            pass
    for label, path, what in list(targets):
        link = os.path.join(d, "link_to_" + what)
        os.symlink(path, link)
        targets.append(("a symlink to " + label, link, "link"))
    dangling = os.path.join(d, "dangling")
    os.symlink(os.path.join(d, "nowhere", "x"), dangling)
    targets.append(("a dangling symlink", dangling, "link"))
    st = s.model("stories260k")
    for label, path, what in targets:
        s.add("outputs", "convert -o " + label, ["convert", st, "-o", path, "--quiet"], check=stays(path, what))
    # the cases that must work: a new name, an existing file, a symlink to a file (the link stays, its target
    # gets the new file)
    s.add("outputs", "convert -o a new file", ["convert", st, "-o", os.path.join(d, "new.pipit"), "--quiet"],
          expect="ok", check=is_pipit_at(os.path.join(d, "new.pipit")))
    old = write(os.path.join(d, "old.pipit"), b"old contents")
    s.add("outputs", "convert -o an existing file", ["convert", st, "-o", old, "--quiet"], expect="ok",
          check=is_pipit_at(old))
    target = write(os.path.join(d, "target.pipit"), b"old contents")
    link = os.path.join(d, "link_to_file.pipit")
    os.symlink(target, link)
    s.add("outputs", "convert -o a symlink to a file", ["convert", st, "-o", link, "--quiet"], expect="ok",
          check=is_pipit_at(target, link))
    # logits --output writes into the path: /dev/null takes it, /dev/full is a write error, a FIFO nobody reads
    # is refused at once (it would block for ever), a directory or block device is refused
    qw = s.model("qwen3")
    logits = ["logits", "-m", qw, "--input", os.path.join(qw, "golden.safetensors"), "-t", "1", "--output"]
    s.add("outputs", "logits --output /dev/full", logits + ["/dev/full"], needle="/dev/full",
          check=stays("/dev/full", "chr"))
    s.add("outputs", "logits --output /dev/null", logits + ["/dev/null"], expect="ok", check=stays("/dev/null", "chr"))
    for label, path, what in targets:
        if what in ("fifo", "dir", "blk"):
            s.add("outputs", "logits --output " + label, logits + [path], check=stays(path, what))
    s.add("outputs", "logits --output a dangling symlink's missing directory", logits + [dangling],
          check=stays(dangling, "link"))
    lt = write(os.path.join(d, "logits_target.safetensors"), b"x")
    ll = os.path.join(d, "logits_link.safetensors")
    os.symlink(lt, ll)
    s.add("outputs", "logits --output a symlink to a file", logits + [ll], expect="ok", check=stays(ll, "link"))


# ---- zero dimensions (issue 35.3) ----

class TinyLlamaGguf:
    """A complete llama GGUF (1 layer, 32 wide, the SentencePiece vocab of the fuzz seed) that `pipit run` loads;
    `dims` and `meta` let a case change one tensor's shape or one size."""
    TENSORS = [("token_embd.weight", [32, 12]), ("output_norm.weight", [32]), ("blk.0.attn_norm.weight", [32]),
               ("blk.0.attn_q.weight", [32, 32]), ("blk.0.attn_k.weight", [32, 16]),
               ("blk.0.attn_v.weight", [32, 16]), ("blk.0.attn_output.weight", [32, 32]),
               ("blk.0.ffn_norm.weight", [32]), ("blk.0.ffn_gate.weight", [32, 32]),
               ("blk.0.ffn_up.weight", [32, 32]), ("blk.0.ffn_down.weight", [32, 32])]
    META = {"embedding_length": 32, "block_count": 1, "feed_forward_length": 32, "attention.head_count": 2,
            "attention.head_count_kv": 1, "context_length": 64}

    @classmethod
    def build(cls, dims=None, meta=None, extra=(), raw=(), q8=()):
        """q8: names of tensors stored as Q8_0 (zero bytes) instead of F32."""
        g = make_seeds.Gguf()
        for key, typ, payload in raw:
            g.add(key, typ, payload)
        g.str("general.architecture", "llama")
        for k, v in dict(cls.META, **(meta or {})).items():
            g.u32("llama." + k, v)
        g.f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
        g.f32("llama.rope.freq_base", 10000.0)
        toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(4)] + ["\u2581", "a", "b", "\u2581a", "ab"]
        g.str("tokenizer.ggml.model", "llama")
        g.arr("tokenizer.ggml.tokens", 8, toks)
        g.arr("tokenizer.ggml.scores", 6, [0.0] * 7 + [-1.0, -2.0, -3.0, -4.0, -5.0])
        g.arr("tokenizer.ggml.token_type", 5, [2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1])
        g.u32("tokenizer.ggml.bos_token_id", 1)
        for name, ne in cls.TENSORS + list(extra):
            ne = (dims or {}).get(name, ne)
            n = 1
            for x in ne:
                n *= x
            if name in q8:  # 34-byte blocks of 32 weights
                g.tensor(name, 8, ne, bytes(n // 32 * 34))
                continue
            g.tensor(name, 0, ne, b"".join(struct.pack("<f", ((i * 37) % 17 - 8) / 64.0) for i in range(n)))
        return g.bytes()


def zerodim_cases(s):
    d = s.fresh("zerodim")
    run = ["run", "-p", "a", "-n", "2", "-t", "1"]
    s.add("zerodim", "the unchanged tiny GGUF runs", ["run", "-m", write(os.path.join(d, "ok.gguf"),
                                                                           TinyLlamaGguf.build())] + run[1:],
          expect="ok")
    for name, ne in TinyLlamaGguf.TENSORS:
        for i in range(len(ne)):
            zero = list(ne)
            zero[i] = 0
            p = write(os.path.join(d, "%s_%d.gguf" % (name, i)), TinyLlamaGguf.build(dims={name: zero}))
            s.add("zerodim", "%s dim %d = 0" % (name, i), ["run", "-m", p] + run[1:], needle=name)
            if len(ne) == 2:  # as Q8_0: the rows x blocks arithmetic of quantized weights (this was the SIGFPE)
                p = write(os.path.join(d, "%s_%d_q8.gguf" % (name, i)),
                          TinyLlamaGguf.build(dims={name: zero}, q8=(name,)))
                for cmd in (["run", "-m", p] + run[1:], ["convert", p, "-o", p + ".pipit", "--quiet"]):
                    s.add("zerodim", "%s %s (Q8_0) dim %d = 0" % (cmd[0], name, i), cmd, needle=name)
    # stacked experts with 0 experts: their split divided the bytes by the expert count
    p = write(os.path.join(d, "exps.gguf"), TinyLlamaGguf.build(extra=[("blk.0.ffn_gate_exps.weight", [32, 32, 0])]))
    s.add("zerodim", "ffn_gate_exps with 0 experts", ["run", "-m", p] + run[1:], needle="ffn_gate_exps")
    # sizes of 0 in the metadata: refused where a size is needed (a context_length of 0 means "not given"); convert
    # only copies the tensors, so it may succeed on some (the model is refused when it is run)
    for k in TinyLlamaGguf.META:
        p = write(os.path.join(d, "meta_%s.gguf" % k), TinyLlamaGguf.build(meta={k: 0}))
        s.add("zerodim", "llama.%s = 0" % k, ["run", "-m", p] + run[1:],
              "either" if k == "context_length" else "error")
        s.add("zerodim", "convert with llama.%s = 0" % k, ["convert", p, "-o", os.path.join(d, k + ".pipit"),
                                                          "--quiet"], "either")


# ---- nesting (issue 35.4) ----

SEQ_FIELD = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "decoder": "decoders",
             "post_processor": "processors"}


def nested_sequence(component, depth):
    """`depth` Sequence components each holding the next, the innermost an empty Sequence; built as text (json.dumps
    of 20,000 levels would itself overflow Python's recursion limit)."""
    f = SEQ_FIELD[component]
    return ('{"type": "Sequence", "%s": [' % f) * depth + '{"type": "Sequence", "%s": []}' % f + "]}" * depth


def nesting_cases(s):
    st = s.model("stories260k")
    tj = json.loads(open(os.path.join(st, "tokenizer.json")).read())
    for component in SEQ_FIELD:
        for depth, expect in [(7, "either"), (9, "error"), (20000, "error")]:
            body = dict(tj)
            body[component] = "@@"
            text = json.dumps(body).replace('"@@"', nested_sequence(component, depth))
            d = s.copy_model("stories260k", skip=("tokenizer.json",))
            write(os.path.join(d, "tokenizer.json"), text)
            needle = None if expect == "either" else ("nested deeper than")
            s.add("nesting", "tokenizer.json %s Sequence %d deep" % (component, depth),
                  ["run", "-m", d, "-p", "Once", "-n", "2", "-t", "1"], expect, needle)
            if depth == 20000:
                s.add("nesting", "convert, tokenizer.json %s Sequence %d deep" % (component, depth),
                      ["convert", d, "-o", os.path.join(d, "m.pipit"), "--quiet"], "either")
                s.add("nesting", "tokenize, tokenizer.json %s Sequence %d deep" % (component, depth),
                      ["tokenize", "-m", d, "-p", "Once"], needle="nested deeper than")
    # plain JSON nesting in every JSON file a model folder holds
    deep_obj = '{"a": ' * 20000 + "1" + "}" * 20000
    deep_arr = "[" * 20000 + "]" * 20000
    for fname in ["tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json"]:
        for label, deep in [("object", deep_obj), ("array", deep_arr)]:
            orig = json.loads(open(os.path.join(st, fname)).read())
            orig["zz_deep"] = "@@"
            d = s.copy_model("stories260k", skip=(fname,))
            write(os.path.join(d, fname), json.dumps(orig).replace('"@@"', deep))
            # generation_config.json is optional: a broken one is ignored, so either outcome is right there
            s.add("nesting", "%s with an %s nested 20000 deep" % (fname, label),
                  ["run", "-m", d, "-p", "Once", "-n", "2", "-t", "1"],
                  "either" if fname == "generation_config.json" else "error",
                  None if fname == "generation_config.json" else "nested deeper than")
    # a chat template nesting {% if %} blocks 20,000 deep
    d = s.copy_model("stories260k", skip=("tokenizer_config.json",))
    tc = json.loads(open(os.path.join(st, "tokenizer_config.json")).read())
    tc["chat_template"] = "{% if true %}" * 20000 + "x" + "{% endif %}" * 20000
    write(os.path.join(d, "tokenizer_config.json"), json.dumps(tc))
    s.add("nesting", "chat template with 20000 nested ifs",
          ["template", "-m", d, "--messages", '[{"role": "user", "content": "hi"}]'], needle="nested")
    # GGUF metadata: an array of arrays 20,000 deep
    d = s.fresh("nestgguf")
    deep = struct.pack("<IQ", 9, 1) * 20000 + struct.pack("<IQ", 4, 0)
    s.add("nesting", "GGUF metadata array nested 20000 deep",
          ["run", "-m", write(os.path.join(d, "deep.gguf"), TinyLlamaGguf.build(raw=[("zz.deep", 9, deep)])),
           "-p", "a", "-n", "2"], needle="nested")


# ---- internal errors reached from input (issue 35.5) ----

def internal_cases(s):
    st = s.model("stories260k")
    tj = open(os.path.join(st, "tokenizer.json"), "rb").read()
    tc = open(os.path.join(st, "tokenizer_config.json"), "rb").read()
    bad_tokenizers = [("a 0xFF byte inside a string", tj.replace(b'"<unk>"', b'"<unk\xff>"', 1)),
                      ("an overlong encoding", tj.replace(b'"<unk>"', b'"<unk\xc0\x80>"', 1)),
                      ("a surrogate", tj.replace(b'"<unk>"', b'"<unk\xed\xa0\x80>"', 1)),
                      ("a cut multibyte sequence", tj.replace(b'"<unk>"', b'"<unk\xe2\x82>"', 1))]
    for label, data in bad_tokenizers:
        assert data != tj
        d = s.copy_model("stories260k", skip=("tokenizer.json",))
        write(os.path.join(d, "tokenizer.json"), data)
        s.add("internal", "convert, tokenizer.json with " + label, ["convert", d, "-o", os.path.join(d, "m.pipit"),
                                                                    "--quiet"], needle="UTF-8")
        s.add("internal", "run, tokenizer.json with " + label, ["run", "-m", d, "-p", "x", "-n", "2"])
        s.add("internal", "inspect, tokenizer.json with " + label, ["inspect", d], "either")
    d = s.copy_model("stories260k", skip=("tokenizer_config.json",))
    write(os.path.join(d, "tokenizer_config.json"), tc.replace(b"{", b'{"zz": "\xff\xfe",', 1))
    s.add("internal", "convert, tokenizer_config.json with a 0xFF byte",
          ["convert", d, "-o", os.path.join(d, "m.pipit"), "--quiet"], needle="UTF-8")
    d = s.copy_model("stories260k")
    write(os.path.join(d, "chat_template.jinja"), b"{{ messages[0]['content'] }}\xff")
    s.add("internal", "convert, chat_template.jinja with a 0xFF byte",
          ["convert", d, "-o", os.path.join(d, "m.pipit"), "--quiet"], needle="UTF-8")


def pipit_header_cases(s):
    """After the setup conversion: fields of the .pipit header with the wrong type, through inspect and run."""
    b = open(s.pipit_file, "rb").read()
    hb, doff, _ = struct.unpack("<QQQ", b[16:40])
    h = json.loads(b[40:40 + hb])
    muts = [("quantization", "x"), ("quantization", 5), ("quantization", []), ("quantization", {"quant": 5}),
            ("quantization", {"target": None, "layout": [1]}), ("quantization", {"rules": "x"}),
            ("quantization", {"fallbacks": {"a": 1}}), ("generator", 5), ("generator", {"x": 1}),
            ("generation_config", "x"), ("generation_config", {"temperature": "hot"}),
            ("config", {"model_type": 5}), ("config", {"model_type": "llama", "hidden_size": "64"}),
            ("tokenizer", 5), ("chat_template", ["x"])]
    for field, val in muts:
        hh = json.loads(json.dumps(h))
        hh[field] = val
        nh = json.dumps(hh, sort_keys=True).encode()
        if 40 + len(nh) > doff:
            continue
        nb = b[:16] + struct.pack("<Q", len(nh)) + b[24:40] + nh + b"\0" * (doff - 40 - len(nh)) + b[doff:]
        d = s.fresh("pipithdr")
        p = write(os.path.join(d, "m.pipit"), nb)
        label = ".pipit %s=%s" % (field, json.dumps(val))
        s.add("internal", "inspect " + label, ["inspect", p], "either")
        s.add("internal", "run " + label, ["run", "-m", p, "-p", "x", "-n", "2", "-t", "1"], "either")


# ---- config floats (issue 35.12) and stdout write errors (issue 35.14) ----

def float_cases(s, inp):
    """Float fields of config.json that made every logit NaN: each must be refused, naming the field."""
    muts = [("llama", "rope_theta", v) for v in [0, -1, 1e-300, 1.0, 1e300, "1e4", None]]
    muts += [("llama", "rms_norm_eps", v) for v in [-1e-6, 2.0, 1e300]]
    muts += [("gemma3_text", "rope_local_base_freq", 0), ("gemma3_text", "query_pre_attn_scalar", 0),
             ("gemma3_text", "query_pre_attn_scalar", -256), ("gemma3_text", "final_logit_softcapping", -30),
             ("gemma3_text", "attn_logit_softcapping", -1), ("qwen3_moe", "rope_theta", 0),
             ("llama", "rope_scaling", {"rope_type": "linear", "factor": 0}),
             ("llama", "rope_scaling", {"rope_type": "linear", "factor": -2}),
             ("llama", "rope_scaling", {"rope_type": "llama3", "factor": 0, "low_freq_factor": 1,
                                        "high_freq_factor": 4, "original_max_position_embeddings": 64})]
    for model, key, v in muts:
        cfg = json.loads(open(os.path.join(s.model(model), "config.json")).read())
        if v is None:
            cfg.pop(key, None)  # absent: the default base applies and the model runs
        else:
            cfg[key] = v
        d = s.copy_model(model, skip=("config.json",))
        write(os.path.join(d, "config.json"), json.dumps(cfg))
        needle = "rope" if key == "rope_scaling" else key
        s.add("floats", "%s %s=%s" % (model, key, json.dumps(v)),
              ["logits", "-m", d, "--input", inp, "--output", "/dev/null", "-t", "1"],
              "ok" if v is None else "error", None if v is None else needle)


def stdout_cases(s):
    """Every command that prints its result must fail (exit 1, one line) when stdout cannot be written."""
    st = s.model("stories260k")
    for label, argv in [("run", ["run", "-m", st, "-p", "Once", "-n", "4", "-t", "1"]),
                        ("tokenize", ["tokenize", "-m", st, "-p", "Once upon a time"]),
                        ("inspect", ["inspect", st]),
                        ("template", ["template", "-m", os.path.join(s.td, "tokenizers", "qwen3"), "--messages",
                                      '[{"role": "user", "content": "hi"}]']),
                        ("bench", ["bench", "-m", st, "-p", "8", "-n", "2", "-r", "1", "-t", "1"]),
                        ("--version", ["--version"])]:
        s.add("stdout", label + " > /dev/full", argv, needle="stdout", stdout="/dev/full")


def make_non_file(path, label):
    """Puts "a directory", "a FIFO" or "a device" (a link to /dev/zero) at path."""
    if label == "a directory":
        os.makedirs(path)
    elif label == "a FIFO":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)


def sidefile_cases(s):
    """A model folder's optional files that are a directory, a FIFO or a device: an error naming the file, not
    silently ignored (a FIFO must not block the load either)."""
    for fname in ["tokenizer_config.json", "generation_config.json", "chat_template.jinja", "tokenizer.json"]:
        for label in ["a directory", "a FIFO", "a device"]:
            d = s.copy_model("stories260k", skip=(fname,))
            make_non_file(os.path.join(d, fname), label)
            for cmd in (["run", "-m", d, "-p", "x", "-n", "2", "-t", "1"], ["tokenize", "-m", d, "-p", "x"],
                        ["convert", d, "-o", os.path.join(d, "m.pipit"), "--quiet"]):
                if cmd[0] == "tokenize" and fname == "generation_config.json":
                    continue  # the tokenizer does not read it
                s.add("sidefiles", "%s %s is %s" % (cmd[0], fname, label), cmd, needle=fname)
    # the processors' configs, read when an image, a video or a clip comes (they were silently ignored: the Hub
    # defaults applied)
    here = os.path.dirname(os.path.abspath(__file__))
    for model, fname, media in [
            ("qwen2_vl", "preprocessor_config.json", ["--image", os.path.join(s.model("qwen2_vl"), "img_100x75.png")]),
            ("qwen3_5_vl", "video_preprocessor_config.json",
             ["--video", ",".join(os.path.join(s.model("qwen3_5_vl"), "video_frame%02d.png" % i) for i in range(4))]),
            ("gemma4", "processor_config.json", ["--audio", os.path.join(s.model("gemma4"), "tone_1200ms.wav")])]:
        for label in ["a directory", "a FIFO", "a device"]:
            d = s.copy_model(model, skip=(fname,))
            make_non_file(os.path.join(d, fname), label)
            if model == "gemma4":  # the toy tokenizer that writes audio placeholders (as audio_cases uses)
                for f in ("tokenizer.json", "tokenizer_config.json"):
                    os.symlink(os.path.join(here, "..", "data", "gemma4_tokenizer", f), os.path.join(d, f))
                cmd = ["run", "-m", d, "-p", "Transcribe", "-n", "1", "-t", "1"] + media
            else:
                cmd = ["vision", "-m", d, "-o", "/dev/null", "-t", "1"] + media
            s.add("sidefiles", "%s %s is %s" % (cmd[0], fname, label), cmd, needle=fname)


def schema_cases(s):
    """Structured output that is large but valid must compile in bounded time (issue 35.7: the grammar's rule
    naming, line counting and nullable analysis were each quadratic); a deep left-recursive chain is an error."""
    st = s.model("stories260k")
    d = s.fresh("schemas")
    run = ["run", "-m", st, "-p", "x", "-n", "2", "-t", "1"]
    enum = {"type": "object", "properties": {"a": {"enum": ["value%d" % i for i in range(30000)]}}, "required": ["a"]}
    props = {"type": "object", "properties": {"p%d" % i: {"type": "integer"} for i in range(20000)}}
    for label, schema in [("enum of 30000 strings", enum), ("20000 optional properties", props)]:
        path = write(os.path.join(d, label.replace(" ", "_") + ".json"), json.dumps(schema))
        s.add("schemas", label, run + ["--json-schema-file", path], "ok", timeout=10)
    # a chain r0 ::= r1 "x" | "y", r1 ::= r2 "x" | "y", ... closing on itself: left recursion 30k rules deep (1 MiB file bound)
    n = 30000
    rules = ["root ::= r0"] + ['r%d ::= r%d "x" | "y"' % (i, (i + 1) % n) for i in range(n)]
    path = write(os.path.join(d, "chain.gbnf"), "\n".join(rules) + "\n")
    s.add("schemas", "left-recursive chain of %d rules" % n, run + ["--grammar-file", path], "error",
          "left-recursive", timeout=10)
    # the grammar's size is bounded as it is built (1,048,576 characters, classes and references): repetitions of a
    # rule count their copies, a long literal its characters
    path = write(os.path.join(d, "copies.gbnf"), "root ::= " + " ".join("r%d" % i for i in range(200)) + "\n" +
                 "".join('r%d ::= "ab"{10000}\n' % i for i in range(200)))
    s.add("schemas", "200 x {10000} copies (2M elements)", run + ["--grammar-file", path], "error",
          "the most one may have", timeout=5)
    big = {"type": "object", "properties": {"a": {"enum": ["x" * (400 * 1000)]}}, "required": ["a"]}
    path = write(os.path.join(d, "long_literal.json"), json.dumps(big))
    s.add("schemas", "an enum string of 400k characters", run + ["--json-schema-file", path], "ok", timeout=10)
    # the same chain without the cycle: valid, and as deep
    rules = ["root ::= r0"] + ['r%d ::= r%d "x" | "y"' % (i, i + 1) for i in range(n - 1)] + ['r%d ::= "y"' % (n - 1)]
    path = write(os.path.join(d, "deep.gbnf"), "\n".join(rules) + "\n")
    s.add("schemas", "left-reference chain of %d rules" % n, run + ["--grammar-file", path], "ok", timeout=10)


def unicode_cases(s):
    """Issue 35.9: text that made normalization quadratic, through a real NFC tokenizer (Qwen3's)."""
    d = s.fresh("unicode")
    tok = os.path.join(s.td, "tokenizers", "qwen3")
    for label, text in [("80k alternating combining marks", "a" + "\u0301\u0316" * 40000),
                        ("80k marks between Hangul jamo", "\u1100" + "\u1161\u0316\u0301" * 26000)]:
        path = write(os.path.join(d, label.replace(" ", "_") + ".jsonl"), json.dumps({"text": text}) + "\n")
        s.add("unicode", label, ["tokenize", "-m", tok, "--jsonl", path], "ok", timeout=8)


def progressive_jpeg(width, n_extra_scans):
    """A progressive JPEG (PIL) whose smallest scan is repeated n_extra_scans times before EOI."""
    import io
    import numpy as np
    from PIL import Image
    img = Image.fromarray((np.random.RandomState(1).rand(width, width, 3) * 255).astype("uint8"))
    buf = io.BytesIO()
    img.save(buf, "JPEG", progressive=True, quality=80)
    data = buf.getvalue()
    i, segs = 2, []
    while i < len(data):
        m = data[i + 1]
        if m == 0xD9:
            break
        n = struct.unpack(">H", data[i + 2:i + 4])[0]
        j = i + 2 + n
        if m == 0xDA:  # the entropy-coded data runs to the next marker that is not a stuffed byte or a restart
            while not (data[j] == 0xFF and data[j + 1] != 0x00 and not 0xD0 <= data[j + 1] <= 0xD7):
                j += 1
        segs.append((m, data[i:j]))
        i = j
    last_scan = min((b for m, b in segs if m == 0xDA), key=len)  # the smallest scan (a DC refinement: bytes)
    return data[:2] + b"".join(b for _, b in segs) + last_scan * n_extra_scans + b"\xff\xd9"


def jpeg_cases(s):
    """Issue 35.9: a progressive JPEG's scans bound its decode time; past 1000 it is refused."""
    d = s.fresh("jpeg")
    for label, width, extra, expect in [("512x512, 20000 repeated scans", 512, 20000, "error"),
                                        ("64x64, 50 repeated scans", 64, 50, "ok")]:
        path = write(os.path.join(d, label.replace(" ", "_").replace(",", "") + ".jpg"), progressive_jpeg(width, extra))
        s.add("jpeg", label, ["vision", "-m", s.model("qwen2_vl"), "--image", path, "-o", "/dev/null", "-t", "1"],
              expect, "progressive scans" if expect == "error" else None, timeout=8)


def wrong_cases(s):
    """Issue 35.11."""
    d = s.fresh("wrong")
    src = os.path.join(s.td, "tokenizers", "qwen3")
    cfg = json.loads(open(os.path.join(src, "tokenizer_config.json")).read())
    for label, tpl, expect, needle in [
            ("range(0, 2**63-1, 2**62) has 2 items", "{{ range(0, 9223372036854775807, 4611686018427387904) | list }}",
             "ok", None),
            ("range(-2**63+1, 2**63-1) is too long", "{{ range(-9223372036854775807, 9223372036854775807) | list }}",
             "error", "range"),
            # issue 35.10: sizes a template asks for, bounded before they are allocated
            ("format width 999999999", "{{ '{:>999999999}'.format('a') }}", "error", "format width"),
            ("format width of 23 digits", "{{ '{:>99999999999999999999999}'.format('a') }}", "error", "format width"),
            ("format precision 10**9", "{{ '{:.1000000000f}'.format(1.5) }}", "error", "precision"),
            ("zfill(999999999)", "{{ 'a'.zfill(999999999) }}", "error", "exceeds"),
            ("a string doubled 40 times", '{% set ns = namespace(s="x") %}{% for i in range(40) %}'
             '{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}', "error", "exceeds")]:
        t = s.fresh("wrong_tpl")
        os.symlink(os.path.join(src, "tokenizer.json"), os.path.join(t, "tokenizer.json"))
        cfg["chat_template"] = tpl
        write(os.path.join(t, "tokenizer_config.json"), json.dumps(cfg))
        s.add("wrong", label, ["template", "-m", t, "--messages", "[]"], expect, needle)
    # a tokenizer.json whose normalizers multiply the text (the old build took 410 s and 18 GB for "banana")
    tj = json.loads(open(os.path.join(s.model("stories260k"), "tokenizer.json")).read())
    for label, norm in [("28 Replace('a', 'aa') in a Sequence",
                         {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"},
                                                               "content": "aa"}] * 28}),
                        ("a Replace of 'a' by 100k characters",
                         {"type": "Replace", "pattern": {"String": "a"}, "content": "b" * 100000})]:
        t = s.fresh("wrong_norm")
        write(os.path.join(t, "tokenizer.json"), json.dumps(dict(tj, normalizer=norm)))
        os.symlink(os.path.join(s.model("stories260k"), "tokenizer_config.json"), os.path.join(t, "tokenizer_config.json"))
        s.add("wrong", "normalizers: " + label, ["tokenize", "-m", t, "-p", "banana " * 100], "error", "normalizer",
              timeout=5)
    for label, ids in [("an id past the vocabulary", [1, 2, 999999999]), ("a negative id", [1, -1]),
                       ("an id past int64", [18446744073709551615])]:
        path = write(os.path.join(d, label.replace(" ", "_") + ".jsonl"), json.dumps({"ids": ids}) + "\n")
        s.add("wrong", "tokenize --decode " + label,
              ["tokenize", "-m", s.model("stories260k"), "--decode", "--jsonl", path], "error", "vocabulary")


# ---- inputs that never end or never open (issue 35.10) ----

def stream_cases(s):
    st = s.model("stories260k")
    d = s.fresh("streams")
    out = os.path.join(d, "out.pipit")
    # a recipe is a list of rules: past 1 MiB it is refused (a FIFO is read as a pipe, as `cat` would: not a case)
    s.add("streams", "convert --recipe /dev/zero", ["convert", st, "-o", out, "--quiet", "--recipe", "/dev/zero"],
          needle="1.0 MB", timeout=5)
    # JSONL on an endless input: one line may have 64 MiB (the -f bound), then an error naming the line
    tok = os.path.join(s.td, "tokenizers", "qwen3")
    for label, argv in [("tokenize --jsonl", ["tokenize", "-m", st, "--jsonl"]),
                        ("tokenize --decode --jsonl", ["tokenize", "-m", st, "--decode", "--jsonl"]),
                        ("template --jsonl", ["template", "-m", tok, "--jsonl"])]:
        s.add("streams", label + " /dev/zero", argv + ["/dev/zero"], needle="67.1 MB", timeout=10)
    endless = write(os.path.join(d, "endless.jsonl"), '{"text": "' + "a" * (70 << 20) + '"}\n')
    s.add("streams", "tokenize --jsonl with a 70 MB line", ["tokenize", "-m", st, "--jsonl", endless],
          needle="67.1 MB", timeout=10)
    # weights that are a FIFO: the model file itself, a shard of a folder, a GGUF, a .pipit
    for name in ("model.gguf", "model.pipit"):
        p = os.path.join(d, name)
        os.mkfifo(p)
        s.add("streams", "run -m a FIFO named " + name, ["run", "-m", p, "-p", "x", "-n", "2", "-t", "1"], timeout=5)
    m = s.copy_model("stories260k", skip=("model.safetensors",))
    os.mkfifo(os.path.join(m, "model.safetensors"))
    for cmd in (["run", "-m", m, "-p", "x", "-n", "2", "-t", "1"], ["convert", m, "-o", out, "--quiet"]):
        s.add("streams", cmd[0] + " with model.safetensors a FIFO", cmd, needle="model.safetensors", timeout=5)
    m = s.copy_model("stories260k", skip=("model.safetensors",))
    os.mkfifo(os.path.join(m, "model-00002-of-00002.safetensors"))
    os.symlink(os.path.join(st, "model.safetensors"), os.path.join(m, "model-00001-of-00002.safetensors"))
    with open(os.path.join(st, "model.safetensors"), "rb") as f:
        hdr = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    names = sorted(k for k in hdr if k != "__metadata__")
    wmap = {k: "model-0000%d-of-00002.safetensors" % (1 if i % 2 == 0 else 2) for i, k in enumerate(names)}
    write(os.path.join(m, "model.safetensors.index.json"), json.dumps({"metadata": {}, "weight_map": wmap}))
    s.add("streams", "run with a shard that is a FIFO", ["run", "-m", m, "-p", "x", "-n", "2", "-t", "1"],
          needle="model-00002-of-00002", timeout=5)
    # a GGUF carrying a 10 MB chat template of small expressions (8.6 s and 930 MB to parse before; 35 s and 1.4 GB
    # in the sweep): templates over 1 MiB are refused when used; the model still runs without its template
    big = "{% for m in messages %}{{ m.content }}{% endfor %}" + "{{ 'x' }}" * ((10 << 20) // 9)
    p = write(os.path.join(d, "template.gguf"),
              TinyLlamaGguf.build(raw=[("tokenizer.chat_template", 8, make_seeds.Gguf.s(big))]))
    run = ["run", "-m", p, "-p", "a", "-n", "2", "-t", "1"]
    s.add("streams", "GGUF with a 10 MB chat template", run, needle="chat template may have", timeout=5)
    s.add("streams", "GGUF with a 10 MB chat template, --no-template", run + ["--no-template"], "ok", timeout=5)


def add_all(s, inp):
    """Called by hostile_test.py before the setup conversion; pipit_header_cases is called after it."""
    output_cases(s, inp)
    zerodim_cases(s)
    nesting_cases(s)
    internal_cases(s)
    float_cases(s, inp)
    stdout_cases(s)
    sidefile_cases(s)
    schema_cases(s)
    unicode_cases(s)
    jpeg_cases(s)
    wrong_cases(s)
    stream_cases(s)
