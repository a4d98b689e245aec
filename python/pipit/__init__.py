"""pipit: LLM / VLM inference on the CPU, from Python.

    import pipit
    m = pipit.Model("stories260k")                      # HF directory, .pipit or .gguf file
    print(m.generate("Once upon a time", max_tokens=32, temperature=0,
                     on_text=lambda piece, tok: print(piece, end="", flush=True)))
    logits = m.logits(m.tokenize("Hello"))              # numpy [n_tokens, n_vocab]
    g = pipit.Model("gemma-4-E2B-it")                   # audio in: a file, its bytes, or 16 kHz float PCM
    print(g.chat("Transcribe this.", audio=["clip.wav"], max_tokens=64))

pipit.ops runs the engine's kernels eagerly on numpy arrays (matmul with quantized pipit.Tensor weights, rms_norm,
rope, attention, softmax, silu, ...), so a new model can be written op by op in Python; see README.md.
Errors the engine reports (a missing file, an unknown architecture, a prompt over the context) are pipit.Error;
bad arguments are ValueError / TypeError.
"""
import json

from . import _pipit
from ._pipit import Completion, Error, Tensor, load_safetensors  # noqa: F401  (public names)
from ._pipit import ops  # noqa: F401

__version__ = _pipit.__version__
__all__ = ["Model", "Session", "Tensor", "Completion", "Error", "ops", "load_safetensors", "rope_freqs"]


def _options(max_tokens=256, temperature=None, top_k=None, top_p=None, min_p=None, repeat_penalty=None,
             presence_penalty=0.0, frequency_penalty=0.0, seed=None, stop=None, ignore_eos=False,
             grammar=None, json_schema=None, logprobs=None, lookup=0, mtp=0, no_repeat_ngram_size=-1,
             logit_bias=None):
    """temperature, top_k, top_p, min_p, repeat_penalty: None takes the model's generation_config.json value (as
    HF generate() does), else 0.8, 40, 0.95, 0.05, 1.0; seed: None draws a new one (Completion.seed tells which);
    logit_bias: {token id: bias in [-100, 100]} added to those logits (-100 bans the token; OpenAI's logit_bias);
    grammar: GBNF text; json_schema: a dict or its JSON text (the answer is JSON valid under it); logprobs: N to
    record each generated token's log-probability and its N most likely alternatives (Completion.logprobs);
    lookup: N guesses per step by prompt lookup (speculative decoding: the same tokens, fewer passes);
    mtp: N guesses per step by the model's own multi-token-prediction head (Qwen3.5; the same tokens);
    no_repeat_ngram_size: HF generate()'s (-1: the model's default, 0: off)."""
    o = _pipit.GenerateOptions()
    o.grammar = grammar or ""
    o.json_schema = json.dumps(json_schema) if isinstance(json_schema, dict) else (json_schema or "")
    o.logprobs = -1 if logprobs is None else logprobs
    o.lookup = lookup
    o.mtp = mtp
    o.no_repeat_ngram_size = no_repeat_ngram_size
    o.max_tokens, o.temperature, o.top_k, o.top_p, o.min_p = max_tokens, temperature, top_k, top_p, min_p
    o.repeat_penalty, o.presence_penalty, o.frequency_penalty = repeat_penalty, presence_penalty, frequency_penalty
    o.seed, o.ignore_eos = seed, ignore_eos
    o.stop = [stop] if isinstance(stop, str) else list(stop or [])
    o.logit_bias = {int(k): float(v) for k, v in (logit_bias or {}).items()}
    return o


def _image_source(part):
    """The file path / URL of an image content part ({"type": "image", "image": ...} as HF processors take it, or
    OpenAI's {"type": "image_url", "image_url": {"url": ...}}); None when the part names no image."""
    if part.get("type") == "image_url":
        u = part.get("image_url")
        return u.get("url") if isinstance(u, dict) else u
    for key in ("image", "path", "url"):
        if isinstance(part.get(key), str):
            return part[key]
    return None


def _audio_source(part):
    """The clip of an audio content part: {"type": "audio", "audio": PATH | bytes | samples} (samples: 16 kHz mono
    float), or OpenAI's {"type": "input_audio", "input_audio": {"data": BASE64, "format": "wav"}}."""
    if part.get("type") == "input_audio":
        import base64
        a = part.get("input_audio") or {}
        return base64.b64decode(a.get("data", "")) if isinstance(a, dict) else None
    for key in ("audio", "path", "url"):
        if part.get(key) is not None:
            return part[key]
    return None


def _videos(videos):
    """Videos as (frame paths, fps) pairs, fps 0 for a video file: each given as a video file path or data URL
    (decoded at its own frame rate), as {"video": FILE}, as (frame paths, fps) or as {"frames": [...], "fps": F}."""
    out = []
    for v in videos or ():
        if isinstance(v, str):
            out.append(([v], 0.0))
            continue
        frames, fps = (v.get("frames", v.get("video")), v.get("fps", 2.0)) if isinstance(v, dict) else v
        if isinstance(frames, str) and frames:
            out.append(([frames], 0.0))  # a video file: its own frame rate
            continue
        if isinstance(frames, str) or not frames:
            raise ValueError("a video is a video file (path or data URL) or a list of frame files with their fps")
        if not float(fps) > 0:
            raise ValueError("the fps of a video's frames must be > 0")
        out.append((list(frames), float(fps)))
    return out


class Session:
    """One conversation: a KV cache that grows with each call. Not shared between threads."""

    def __init__(self, model, n_ctx=0, n_batch=512, kv_type=None):
        self.model = model
        self._s = model._m.session(n_ctx, n_batch, kv_type or model.kv_type)

    @property
    def n_past(self):
        return self._s.n_past

    @property
    def n_ctx(self):
        return self._s.n_ctx

    def reset(self):
        self._s.reset()

    def truncate(self, n):
        """Forget positions from n on (the session may keep fewer: check n_past)."""
        self._s.truncate(n)

    def eval(self, ids, all_logits=False, images=(), videos=(), audio=()):
        """Appends ids; returns float32 logits [1, n_vocab] for the last one, or [len(ids), n_vocab]. videos, audio:
        see Model.generate."""
        return self._s.eval(ids, list(images), all_logits, _videos(videos), list(audio))

    def generate(self, prompt, on_text=None, images=(), videos=(), audio=(), **options):
        """Continues the session with prompt (text, or token ids) and samples a reply; see Model.generate."""
        ids = self.model.tokenize(prompt, add_special=self.n_past == 0) if isinstance(prompt, str) else prompt
        return self._s.generate(ids, list(images), _options(**options), on_text, _videos(videos), list(audio))

    def chat(self, messages, on_text=None, images=None, audio=None, **options):
        """A reply to a conversation, as Model.chat, keeping the KV cache across calls: pass the whole conversation
        each turn (the earlier messages, the replies as they were given, the new message) and only what differs
        from what the session holds is evaluated (n_reused says how many prompt tokens were kept). The reply is
        the one a fresh session would give. Other arguments as in Model.chat."""
        ids, images, videos, audio = self.model._chat_prompt(messages, images, audio)
        return self._s.converse(ids, list(images), _options(**options), on_text, _videos(videos), list(audio))

    @property
    def n_reused(self):
        """Prompt tokens the last chat() call kept from the session's context instead of evaluating them."""
        return self._s.n_reused


class Model:
    """A loaded model: an HF checkpoint directory, a .pipit file or a .gguf file.
    mmproj: llama.cpp's vision-tower file for a multimodal .gguf (Qwen2-VL, Qwen2.5-VL)."""

    def __init__(self, path, n_threads=0, mmproj=None, kv_type="f16", precision="exact", mmap=False):
        """kv_type: the KV cache dtype of this model's sessions (logits(), generate(), chat(), session()): "f16" (as
        llama.cpp), "f32" (the exact path the goldens are checked on) or "q8" (q8_0 blocks of 32).
        precision: "exact" (f16 / bf16 weights multiplied in f32) or "fast" (bf16 dot products where the CPU has
        them: about 2x the prefill speed, activations rounded to bf16; as the CLI's --precision).
        mmap: False (the default) copies the weights the CPU reads as stored into 2 MiB pages at load (a faster
        decode); True uses them in place from the file mapping: a faster start and less memory, a slower decode (as
        the CLI's --mmap)."""
        if not isinstance(mmap, bool):
            raise ValueError(f"mmap must be True or False, got {mmap!r}")
        self._m = _pipit.Model(str(path), n_threads, str(mmproj) if mmproj else "", precision, mmap)
        self.kv_type = kv_type

    arch = property(lambda self: self._m.arch)
    n_vocab = property(lambda self: self._m.n_vocab)
    n_embd = property(lambda self: self._m.n_embd)
    n_layer = property(lambda self: self._m.n_layer)
    max_ctx = property(lambda self: self._m.max_ctx)
    bos_id = property(lambda self: self._m.bos_id)
    eos_ids = property(lambda self: self._m.eos_ids)
    has_vision = property(lambda self: self._m.has_vision)
    has_audio = property(lambda self: self._m.has_audio)
    has_tokenizer = property(lambda self: self._m.has_tokenizer)

    @property
    def config(self):
        """config.json as a dict."""
        return json.loads(self._m.config_json)

    def tokenize(self, text, add_special=True):
        return self._m.tokenize(text, add_special)

    def detokenize(self, ids, skip_special=False):
        return self._m.detokenize(ids, skip_special)

    def apply_chat_template(self, messages, add_generation_prompt=True):
        """The model's chat template rendered over messages ([{"role": ..., "content": ...}]), as text."""
        return self._m._chat_template(json.dumps(messages), add_generation_prompt)

    def weight(self, name):
        """A weight by its HF name as a pipit.Tensor in the file's dtype (q4_0, q6_k, bf16, ...)."""
        return self._m.weight(name)

    def weight_names(self):
        return self._m.weight_names()

    def session(self, n_ctx=0, n_batch=512, kv_type=None):
        """A new conversation; kv_type: "f16", "f32" or "q8" (default: the model's kv_type)."""
        return Session(self, n_ctx, n_batch, kv_type)

    def _fit_session(self, n_tokens, n_ctx):
        return Session(self, n_ctx or max(n_tokens, min(self.max_ctx or 4096, 4096)))

    def logits(self, ids, images=(), videos=(), audio=()):
        """One forward pass over ids (from position 0): float32 logits [len(ids), n_vocab] (numpy). With images, ids
        hold one image placeholder per image (or runs already expanded), as `pipit logits --image` takes them;
        the same for audio clips and their placeholder."""
        ids = list(ids)
        return self._fit_session(len(ids), 0).eval(ids, all_logits=True, images=images, videos=videos, audio=audio)

    def generate(self, prompt, on_text=None, images=(), n_ctx=0, videos=(), audio=(), **options):
        """Samples a continuation of prompt (text, or token ids; text gets the tokenizer's BOS).

        images / videos / audio fill the prompt's placeholders in order; a video (models with video input: Qwen3.5)
        is its decoded frames and their frame rate, (["f0.png", "f1.png", ...], fps) or {"frames": [...], "fps":
        fps}; an audio clip (models with audio input: Gemma 4) is a file path (WAV, FLAC, OGG, MP3; resampled to
        16 kHz mono), the file's bytes, or a 1-D array of 16 kHz mono float samples. A prompt with no audio
        placeholder gets one per clip after BOS (as `pipit run --audio`).

        on_text(piece, token) is called for each piece of text as it is generated (valid UTF-8; a stop string is
        never shown); returning False stops. options: max_tokens=256, temperature (0: greedy), top_k, top_p, min_p,
        repeat_penalty (each: the model's generation_config.json value, else 0.8, 40, 0.95, 0.05, 1.0),
        presence_penalty=0, frequency_penalty=0, seed (None: a new one, see Completion.seed), stop (strings),
        ignore_eos=False. Returns a Completion (str() gives its text)."""
        ids = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        if audio and self._m.audio_token_id not in ids:  # one placeholder per clip after BOS
            at = 1 if ids and ids[0] == self.bos_id else 0
            ids[at:at] = [self._m.audio_token_id] * len(audio)
        s = self._fit_session(len(ids) + options.get("max_tokens", 256), n_ctx)
        return s.generate(ids, on_text=on_text, images=images, videos=videos, audio=audio, **options)

    def _chat_prompt(self, messages, images, audio):
        """(token ids, image sources, videos, audio clips) of a conversation rendered with the chat template."""
        if isinstance(messages, str):
            parts = [{"type": "image", "image": p} for p in (images or [])]
            parts += [{"type": "audio", "audio": a} for a in (audio or [])]
            messages = [{"role": "user", "content": parts + [{"type": "text", "text": messages}] if parts else messages}]
            images = audio = None
        if audio is None:  # the audio parts of the conversation, in order; the template sees {"type": "audio"}
            audio, msgs = [], []
            for msg in messages:
                if isinstance(msg.get("content"), list):
                    content = []
                    for p in msg["content"]:
                        if isinstance(p, dict) and p.get("type") in ("audio", "input_audio"):
                            a = _audio_source(p)
                            if a is None:
                                raise ValueError("an audio part names no clip (expected {'type': 'audio', "
                                                 "'audio': PATH})")
                            audio.append(a)
                            p = {"type": "audio"}
                        content.append(p)
                    msg = dict(msg, content=content)
                msgs.append(msg)
            messages = msgs
        if images is None:  # the image parts of the conversation, in order
            images = [_image_source(p) for msg in messages if isinstance(msg.get("content"), list)
                      for p in msg["content"] if isinstance(p, dict) and p.get("type") in ("image", "image_url")]
            if None in images:
                raise ValueError("an image part names no image (expected {'type': 'image', 'image': PATH})")
        videos = [p for msg in messages if isinstance(msg.get("content"), list)
                  for p in msg["content"] if isinstance(p, dict) and p.get("type") == "video"]
        text = self.apply_chat_template(messages, add_generation_prompt=True)
        ids = self.tokenize(text, add_special=False)
        return ids, images, videos, audio

    def chat(self, messages, on_text=None, images=None, n_ctx=0, audio=None, **options):
        """A reply to a conversation, through the model's chat template.

        messages: a list of {"role", "content"} dicts (content a string or a list of parts, where
        {"type": "image", "image": "photo.png"} places an image, {"type": "audio", "audio": "clip.wav"} an audio clip
        (or OpenAI's input_audio part) and {"type": "video", "video": "clip.mp4"} or {"type": "video", "video":
        [frame files], "fps": F} a video), or one string (a user message). images / audio: image files / audio clips
        for a string message, placed before its text. Other arguments as in generate()."""
        ids, images, videos, audio = self._chat_prompt(messages, images, audio)
        s = self._fit_session(len(ids) + options.get("max_tokens", 256), n_ctx)
        return s.generate(ids, on_text=on_text, images=images, videos=videos, audio=audio, **options)


def rope_freqs(config, head_dim):
    """(inv_freq, attention_factor) for a config dict's RoPE settings (rope_theta, rope_scaling: llama3, yarn, linear,
    dynamic, longrope, partial_rotary_factor is the caller's: pass the rotated dims), as the C++ models compute them."""
    return ops._rope_freqs(json.dumps(config), head_dim)
