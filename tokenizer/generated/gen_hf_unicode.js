// Generates hf_unicode_props.h: the code points that HF tokenizers' regex engine (Oniguruma, inside the Rust crate)
// puts in \p{L}, \p{N}, ..., \w, \d and \s. PCRE2 builds may carry an older Unicode version, so pipit completes
// PCRE2's properties with these sets (tokenizer/regex.cpp) and its fast pre-tokenizers read them directly.
// Also the character predicates of HF's Rust code (char::is_numeric for Digits, the Punctuation pre-tokenizer's
// is_punc, the Rust regex \w of Whitespace and of added tokens' single_word, char::is_whitespace) and the
// Lowercase normalizer's mapping, each from the Unicode version HF was built with.
//
// The sets are measured, not copied from the Unicode tables: for each regex property a byte-level tokenizer.json
// whose pre-tokenizer removes every match is built, all code points are encoded through HF, and the removed ones
// are recorded; the predicates are read from how HF's pre-tokenizers split "a<c>a" for every code point c.
//
// Run (versions used for the committed header: @anush008/tokenizers 0.6.0 = HF tokenizers 0.22.2, onig_sys 69.9.1
// = Oniguruma 6.9.10, Unicode 16.0; Node 20):
//   mkdir /tmp/hfuni && cd /tmp/hfuni && npm install @anush008/tokenizers@0.6.0
//   NODE_PATH=/tmp/hfuni/node_modules node gen_hf_unicode.js > hf_unicode_props.h
const { Tokenizer } = require('@anush008/tokenizers');
const fs = require('fs');
const os = require('os');
const path = require('path');

const PROPS = [
  ['L', '\\p{L}'], ['Lu', '\\p{Lu}'], ['Ll', '\\p{Ll}'], ['Lt', '\\p{Lt}'], ['Lm', '\\p{Lm}'], ['Lo', '\\p{Lo}'],
  ['N', '\\p{N}'], ['Nd', '\\p{Nd}'], ['Nl', '\\p{Nl}'], ['No', '\\p{No}'],
  ['P', '\\p{P}'], ['S', '\\p{S}'], ['M', '\\p{M}'], ['Z', '\\p{Z}'],
  ['w', '\\w'], ['d', '\\d'], ['s', '\\s'],
];
const SEP = 1;  // U+0001 separates the probes; it is in none of the properties above

function byteLevelVocab() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  const vocab = {};
  bs.forEach((b, i) => { vocab[String.fromCodePoint(cs[i])] = b; });
  return vocab;
}

async function measure(regex) {
  const tj = {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: regex }, behavior: 'Removed', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false }] },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, vocab: byteLevelVocab(), merges: [] } };
  const file = path.join(os.tmpdir(), 'gen_hf_unicode_tok.json');
  fs.writeFileSync(file, JSON.stringify(tj));
  const tok = Tokenizer.fromFile(file);
  const inSet = new Uint8Array(0x110000);
  for (let base = 0; base < 0x110000; base += 4096) {
    const cps = [];
    for (let c = base; c < base + 4096; c++) if ((c < 0xd800 || c > 0xdfff) && c !== SEP) cps.push(c);
    const s = cps.map(c => String.fromCodePoint(c) + String.fromCodePoint(SEP)).join('');
    const enc = await tok.encode(s, null, { addSpecialTokens: false });
    const parts = (await tok.decode(Array.from(enc.getIds()), false)).split(String.fromCodePoint(SEP));
    if (parts.length !== cps.length + 1) throw new Error(`probe broke at U+${base.toString(16)} for ${regex}`);
    for (let i = 0; i < cps.length; i++) if (parts[i] === '') inSet[cps[i]] = 1;
  }
  const ranges = [];
  for (let c = 0; c < 0x110000; c++) {
    if (!inSet[c]) continue;
    let e = c;
    while (e + 1 < 0x110000 && inSet[e + 1]) e++;
    ranges.push([c, e]);
    c = e;
  }
  return ranges;
}

function toRanges(inSet) {
  const ranges = [];
  for (let c = 0; c < 0x110000; c++) {
    if (!inSet[c]) continue;
    let e = c;
    while (e + 1 < 0x110000 && inSet[e + 1]) e++;
    ranges.push([c, e]);
    c = e;
  }
  return ranges;
}

// Code points probed in "a<c>a<c>a..." strings (not 'a' itself, U+0001 (a separator), nor surrogates).
function probeChunks() {
  const chunks = [];
  for (let base = 0; base < 0x110000; base += 2048) {
    const cps = [];
    for (let c = base; c < base + 2048 && c < 0x110000; c++) if ((c < 0xd800 || c > 0xdfff) && c !== 0x61 && c !== 1) cps.push(c);
    if (cps.length) chunks.push(cps);
  }
  return chunks;
}

// Classifies each code point by the pieces a pre-tokenizer makes of "a<c>a": 'alone' (a piece of its own),
// 'merged' (inside a longer piece) or 'gone' (removed).
function classifyWithPreTokenizer(cfg) {
  const tok = Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, pre_tokenizer: cfg,
    post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, vocab: { a: 0 }, merges: [] } }));
  const pre = tok.getPreTokenizer();
  const alone = new Uint8Array(0x110000), merged = new Uint8Array(0x110000), gone = new Uint8Array(0x110000);
  for (const cps of probeChunks()) {
    const s = 'a' + cps.map(c => String.fromCodePoint(c) + 'a').join('');
    const seen = new Set();
    for (const [piece] of pre.preTokenizeString(s)) {
      const chars = Array.from(piece).map(ch => ch.codePointAt(0)).filter(c => c !== 0x61);
      const isAlone = chars.length === 1 && piece.length === String.fromCodePoint(chars[0]).length;
      for (const c of chars) { (isAlone ? alone : merged)[c] = 1; seen.add(c); }
    }
    for (const c of cps) if (!seen.has(c)) gone[c] = 1;
  }
  return { alone, merged, gone };
}

// Code points the normalizer `cfg` removes (e.g. StripAccents' combining marks).
function removedByNormalizer(cfg) {
  const tok = Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: cfg,
    pre_tokenizer: null, post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, vocab: { a: 0 }, merges: [] } }));
  const norm = tok.getNormalizer();
  const set = new Uint8Array(0x110000);
  for (const cps of probeChunks()) {
    const parts = norm.normalizeString(cps.map(c => String.fromCodePoint(c)).join('\u0001')).split('\u0001');
    if (parts.length !== cps.length) throw new Error('normalizer probe broke');
    cps.forEach((c, i) => { if (parts[i] === '') set[c] = 1; });
  }
  return set;
}

// Code points the normalizer `cfg` changes when applied to the code point alone.
function changedByNormalizer(cfg) {
  const tok = Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: cfg,
    pre_tokenizer: null, post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, vocab: { a: 0 }, merges: [] } }));
  const norm = tok.getNormalizer();
  const set = new Uint8Array(0x110000);
  for (const cps of probeChunks()) {
    const parts = norm.normalizeString(cps.map(c => String.fromCodePoint(c)).join('\u0001')).split('\u0001');
    if (parts.length !== cps.length) throw new Error('normalizer probe broke');
    cps.forEach((c, i) => { if (parts[i] !== String.fromCodePoint(c)) set[c] = 1; });
  }
  return set;
}

// HF's Lowercase normalizer, code point by code point: [c, lowercase string] for every c it changes.
function lowercaseMap() {
  const tok = Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: { type: 'Lowercase' },
    pre_tokenizer: null, post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, vocab: { a: 0 }, merges: [] } }));
  const norm = tok.getNormalizer();
  const map = [];
  for (const cps of probeChunks()) {
    const parts = norm.normalizeString(cps.map(c => String.fromCodePoint(c)).join('\u0001')).split('\u0001');
    if (parts.length !== cps.length) throw new Error('lowercase probe broke');
    cps.forEach((c, i) => { if (parts[i] !== String.fromCodePoint(c)) map.push([c, parts[i]]); });
  }
  return map;
}

(async () => {
  const hex = (v) => '0x' + v.toString(16).toUpperCase();
  let out = '';
  out += '// Generated by gen_hf_unicode.js (HF tokenizers 0.22.2 via @anush008/tokenizers 0.6.0, Oniguruma 6.9.10,\n';
  out += '// Unicode 16.0). Do not edit. Code point ranges [first, last] of each regex property as HF tokenizers sees it.\n';
  out += '#pragma once\n\n#include <cstddef>\n#include <cstdint>\n#include <iterator>\n\n';
  out += 'namespace pipit::tok::generated {\n\nstruct CodeRange {\n  uint32_t first, last;\n};\n\n';
  const names = [];
  for (const [name, re] of PROPS) {
    const ranges = await measure(re);
    const ident = 'kHf_' + name;
    names.push([name, ident]);
    out += `// ${re}: ${ranges.length} ranges\ninline constexpr CodeRange ${ident}[] = {\n`;
    for (let i = 0; i < ranges.length; i += 6) {
      out += '    ' + ranges.slice(i, i + 6).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`).join(', ') + ',\n';
    }
    out += '};\n\n';
  }
  const predicates = [
    ['numeric', 'char::is_numeric (Digits)', classifyWithPreTokenizer({ type: 'Digits', individual_digits: true }).alone],
    ['punct', 'is_punc (Punctuation)', classifyWithPreTokenizer({ type: 'Punctuation', behavior: 'Isolated' }).alone],
    ['rust_word', 'Rust regex \\w (Whitespace, single_word)', classifyWithPreTokenizer({ type: 'Whitespace' }).merged],
    ['rust_space', 'char::is_whitespace (WhitespaceSplit, Strip)',
     classifyWithPreTokenizer({ type: 'WhitespaceSplit' }).gone],
    ['combining_mark', 'is_combining_mark (StripAccents)', removedByNormalizer({ type: 'StripAccents' })],
    ['nfd_changes', 'code points NFD changes (HF\'s normalization tables are older than the regex ones)',
     changedByNormalizer({ type: 'NFD' })],
    ['nfkd_changes', 'code points NFKD changes', changedByNormalizer({ type: 'NFKD' })],
  ];
  for (const [name, what, set] of predicates) {
    const ranges = toRanges(set);
    const ident = 'kHf_' + name;
    out += `// ${what}: ${ranges.length} ranges\ninline constexpr CodeRange ${ident}[] = {\n`;
    for (let i = 0; i < ranges.length; i += 6) {
      out += '    ' + ranges.slice(i, i + 6).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`).join(', ') + ',\n';
    }
    out += '};\n\n';
  }
  const lower = lowercaseMap();
  out += 'struct LowercaseEntry {\n  uint32_t cp;\n  const char* lower;  // UTF-8\n};\n\n';
  out += `// The Lowercase normalizer (char::to_lowercase): ${lower.length} code points that change, sorted\n`;
  out += 'inline constexpr LowercaseEntry kHfLowercase[] = {\n';
  for (let i = 0; i < lower.length; i += 4) {
    out += '    ' + lower.slice(i, i + 4).map(([c, l]) =>
      `{${hex(c)}, "${Array.from(Buffer.from(l, 'utf8')).map(b => '\\x' + b.toString(16).toUpperCase().padStart(2, '0')).join('')}"}`)
      .join(', ') + ',\n';
  }
  out += '};\n\n';
  out += 'struct HfProperty {\n  const char* name;  // "L", "Nd", ... and "w", "d", "s" for \\w, \\d, \\s\n';
  out += '  const CodeRange* ranges;\n  size_t n_ranges;\n};\n\n';
  out += 'inline constexpr HfProperty kHfProperties[] = {\n';
  for (const [name, ident] of names) out += `    {"${name}", ${ident}, std::size(${ident})},\n`;
  out += '};\n\n}  // namespace pipit::tok::generated\n';
  process.stdout.write(out);
})();
