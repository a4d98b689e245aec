"""Golden for Gemma 3 past its sliding window: the tiny gemma3_text checkpoint with sliding_window = 4 and
attention / final logit soft-capping switched on, a 48-token prompt (12 windows) and a 16-token greedy continuation.

Run from the repository root:  /usr/bin/python3 tests/data/make_gemma3_long_golden.py [TESTDATA]
Writes tests/data/gemma3_long/{config.json, golden.safetensors}; the weights are TESTDATA/models/gemma3_text's.
The math is ../shared/testdata/reference/text_models.py (HF modeling_gemma3.py line by line), run in float32.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared", "testdata")
sys.path.insert(0, os.path.join(TESTDATA, "reference"))
import st_io  # noqa: E402
import text_models  # noqa: E402

T, N_NEW, SEED = 48, 16, 20250901


def main():
    src = os.path.join(TESTDATA, "models", "gemma3_text")
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["sliding_window"] = 4
    cfg["attn_logit_softcapping"] = 2.0   # small caps so they change the logits well beyond the 1e-3 tolerance
    cfg["final_logit_softcapping"] = 0.5
    weights = st_io.load_file(os.path.join(src, "model.safetensors"), as_float32=True)
    model = text_models.RefModel(cfg, weights, dtype=torch.float32)

    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(3, cfg["vocab_size"], (1, T), generator=g, dtype=torch.int64)
    ids[0, 0] = cfg["bos_token_id"]
    with torch.no_grad():
        logits = model.forward(ids)
        greedy_ids, greedy_logits, worst = text_models.greedy(model, ids, N_NEW)
    # the caps must matter: the same run without them differs by far more than the test tolerance
    plain = dict(cfg, attn_logit_softcapping=None, final_logit_softcapping=None)
    with torch.no_grad():
        d_caps = (text_models.RefModel(plain, weights).forward(ids) - logits).abs().max().item()

    out = os.path.join(HERE, "gemma3_long")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    st_io.save_file(
        {
            "input_ids": ids.to(torch.int32),
            "logits": logits.contiguous(),
            "greedy_ids": greedy_ids.to(torch.int32),
            "greedy_logits": greedy_logits.contiguous(),
        },
        os.path.join(out, "golden.safetensors"),
        metadata={"format": "pt", "script": "tests/data/make_gemma3_long_golden.py", "torch": torch.__version__},
    )
    print(f"wrote {out}: T={T}, greedy {greedy_ids.tolist()[0]}, cache-vs-recompute {worst:.2e}, "
          f"softcap effect {d_caps:.3f}")


if __name__ == "__main__":
    main()
