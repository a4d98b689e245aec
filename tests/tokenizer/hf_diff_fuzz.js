// Differential fuzzing against HF tokenizers: random texts (all of Unicode, weighted towards tricky characters and
// special-token strings) and random id lists go through HF (@anush008/tokenizers = HF tokenizers 0.22.2) and
// through `pipit tokenize`; every difference is printed. Not part of ctest (it needs Node and the npm package).
//
//   mkdir /tmp/hf && cd /tmp/hf && npm install @anush008/tokenizers@0.6.0
//   NODE_PATH=/tmp/hf/node_modules node tests/tokenizer/hf_diff_fuzz.js build/pipit TOKENIZER_DIR [N] [SEED]
const { Tokenizer } = require('@anush008/tokenizers');
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [pipit, dir, nStr, seedStr] = process.argv.slice(2);
if (!pipit || !dir) {
  console.error('usage: node hf_diff_fuzz.js PIPIT_BINARY TOKENIZER_DIR [N=2000] [SEED=1]');
  process.exit(2);
}
const N = parseInt(nStr || '2000');
let seed = parseInt(seedStr || '1');
const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x80000000; };
const ri = (n) => Math.floor(rnd() * n);

const ranges = [  // [first, last, weight]
  [0x20, 0x7e, 30], [0x09, 0x0d, 4], [0x80, 0xff, 4], [0x100, 0x24f, 3], [0x300, 0x36f, 4], [0x370, 0x3ff, 2],
  [0x400, 0x4ff, 3], [0x590, 0x5ff, 1], [0x600, 0x6ff, 3], [0x900, 0x97f, 3], [0x980, 0x9ff, 1], [0xb80, 0xbff, 1],
  [0xe00, 0xe7f, 2], [0x1100, 0x11ff, 2], [0x1e00, 0x1eff, 2], [0x2000, 0x206f, 4], [0x2070, 0x218f, 3],
  [0x2190, 0x2bff, 2], [0x3000, 0x303f, 2], [0x3040, 0x30ff, 3], [0x4e00, 0x9fff, 5], [0xac00, 0xd7a3, 3],
  [0xe000, 0xf8ff, 1], [0xf900, 0xfaff, 1], [0xfb00, 0xfdff, 1], [0xfe00, 0xfe0f, 1], [0xff00, 0xffef, 2],
  [0xfff0, 0xfffd, 1], [0x10000, 0x1ffff, 2], [0x1f300, 0x1faff, 4], [0x20000, 0x3134f, 1], [0xe0000, 0xe007f, 1],
  [0x10fff0, 0x10ffff, 1], [0x11f00, 0x11f5f, 1], [0x1e030, 0x1e08f, 1], [0x1e4d0, 0x1e4ff, 1], [0x31350, 0x323af, 1],
];
const atoms = ['\u0085', '\u00a0', '\u2028', '\u2029', '\u3000', '\u200b', '\u200d', '\ufeff', '\u180e', 'ſ', 'K', 'İ',
  'ß', "'s", "'S", "'ll", "'LL", "'Ve", "'ſ", ' ', '  ', '\n', '\r\n', '\t', '▁', '▁▁', '<|im_start|>', '<|endoftext|>',
  '<s>', '</s>', '<unk>', '<bos>', '<start_of_turn>', '<|begin_of_text|>', '<|eot_id|>', '<think>', '<pad>', '<0x41>',
  '12345', '١٢٣', '²', '½', 'Ⅻ', '０１２', '\u0000', '\u001f', '👍🏽', 'é', 'e\u0301', 'Å', 'Ω', '\u1100\u1161\u11a8',
  '\u0915\u093c', 'ﬁ', '\n\n\n', '<unused5>', '<start_of_image>', '<mask>', '\u00ad'];
let totalWeight = 0;
for (const r of ranges) totalWeight += r[2];
function randChar() {
  if (rnd() < 0.15) return atoms[ri(atoms.length)];
  let k = ri(totalWeight);
  for (const [a, b, w] of ranges) {
    if (k < w) {
      const c = a + ri(b - a + 1);
      return String.fromCodePoint(c >= 0xd800 && c <= 0xdfff ? 0x41 : c);
    }
    k -= w;
  }
  return 'x';
}
const randText = () => { let s = ''; const n = rnd() < 0.1 ? ri(400) : ri(40); for (let i = 0; i < n; i++) s += randChar(); return s; };

function runPipit(args, input) {
  const file = path.join(os.tmpdir(), `hf_diff_fuzz_${process.pid}.jsonl`);
  fs.writeFileSync(file, input.map((o) => JSON.stringify(o)).join('\n') + '\n');
  const r = spawnSync(pipit, ['tokenize', '-m', dir, '--jsonl', file, ...args], { maxBuffer: 1 << 30 });
  fs.unlinkSync(file);
  if (r.status !== 0) throw new Error('pipit failed: ' + r.stderr.toString());
  return r.stdout.toString('utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
}

(async () => {
  const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
  const vocab = tok.getVocabSize(true);
  const texts = [], want = [];
  for (let i = 0; i < N; i++) {
    const text = randText();
    const ids = Array.from((await tok.encode(text, null, { addSpecialTokens: false })).getIds());
    const idsSp = Array.from((await tok.encode(text, null, { addSpecialTokens: true })).getIds());
    texts.push({ text });
    want.push({ ids, ids_special: idsSp, decoded: await tok.decode(idsSp, false) });
  }
  const idLists = [], wantDec = [];
  for (let i = 0; i < N; i++) {
    const ids = [];
    const len = ri(30);
    for (let k = 0; k < len; k++) ids.push(rnd() < 0.3 ? ri(300) : rnd() < 0.1 ? vocab - 1 - ri(300) : ri(vocab));
    const skip = rnd() < 0.5;
    idLists.push({ ids, skip_special_tokens: skip });
    wantDec.push({ decoded: await tok.decode(ids, skip) });
  }
  let bad = 0;
  const got = runPipit([], texts), gotDec = runPipit(['--decode'], idLists);
  for (let i = 0; i < N; i++) {
    for (const k of ['ids', 'ids_special', 'decoded']) {
      if (JSON.stringify(got[i][k]) !== JSON.stringify(want[i][k]) && ++bad <= 10)
        console.log(`encode ${JSON.stringify(texts[i].text)}: ${k}\n  hf    ${JSON.stringify(want[i][k])}\n  pipit ${JSON.stringify(got[i][k])}`);
    }
    if (gotDec[i].decoded !== wantDec[i].decoded && ++bad <= 10)
      console.log(`decode ${JSON.stringify(idLists[i])}\n  hf    ${JSON.stringify(wantDec[i].decoded)}\n  pipit ${JSON.stringify(gotDec[i].decoded)}`);
  }
  console.log(`${dir}: ${N} texts, ${N} id lists, ${bad} differences`);
  process.exit(bad ? 1 : 0);
})();
