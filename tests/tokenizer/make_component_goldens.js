// Writes data/components.jsonl: expected outputs of single tokenizer.json components (normalizers, pre-tokenizers,
// decoders) and of small whole tokenizers (BPE options, added-token flags, post-processors, truncation/padding),
// all computed by HF tokenizers itself. components_test.cpp replays them against pipit.
//
// Versions used for the committed file: @anush008/tokenizers 0.6.0 (HF tokenizers 0.22.2), Node 20.
// Run: mkdir /tmp/hf && cd /tmp/hf && npm install @anush008/tokenizers@0.6.0
//      NODE_PATH=/tmp/hf/node_modules node make_component_goldens.js > data/components.jsonl
const { Tokenizer } = require('@anush008/tokenizers');

const out = [];
const emit = (o) => out.push(JSON.stringify(o));

function tokenizerJson(parts) {
  return Object.assign({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, pre_tokenizer: null,
    post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: { a: 0 }, merges: [] },
  }, parts);
}

// ---- normalizers ----
const NORM_TEXTS = ['Hello World', '', ' é e\u0301 ﬁ ① Å Ω ｈｅｌｌｏ 가 \u1100\u1161\u11a8 \u0915\u093c',
  '  \u3000leading and trailing \t\n ', 'İstanbul ΣΑΣ Straße ǅ', 'a  b   c', 'x1y22z333', 'héllo wörld'];
const normalizers = {
  NFC: { type: 'NFC' }, NFD: { type: 'NFD' }, NFKC: { type: 'NFKC' }, NFKD: { type: 'NFKD' },
  Lowercase: { type: 'Lowercase' },
  ReplaceString: { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' },
  ReplaceRegex: { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' },
  ReplaceDigits: { type: 'Replace', pattern: { Regex: '[0-9]+' }, content: '#' },
  Prepend: { type: 'Prepend', prepend: '\u2581' },
  StripBoth: { type: 'Strip', strip_left: true, strip_right: true },
  StripLeft: { type: 'Strip', strip_left: true, strip_right: false },
  StripRight: { type: 'Strip', strip_left: false, strip_right: true },
  StripAccents: { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'StripAccents' }] },
  ByteLevel: { type: 'ByteLevel' },
  Sequence: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' },
                                              { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
};

// ---- pre-tokenizers ----
const PRE_TEXTS = ['How are you doing?', 'Hello world! 123  ok\n', '  lead and trail  ', "Hey man!! What's up? über_cool ②",
  'abc123 4.56 ١٢٣ ½', 'Hello, world!!? (yes) «quote»', 'a\u2581b  c', '', 'x', '\t\n \u3000y'];
const pretoks = {
  ByteLevelPrefix: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  ByteLevelNoPrefix: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  ByteLevelNoRegex: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
  Digits: { type: 'Digits', individual_digits: false },
  DigitsIndividual: { type: 'Digits', individual_digits: true },
  MetaspaceAlways: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true },
  MetaspaceFirst: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: true },
  MetaspaceNever: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'never', split: true },
  MetaspaceNoSplit: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: false },
  Whitespace: { type: 'Whitespace' },
  WhitespaceSplit: { type: 'WhitespaceSplit' },
  Punctuation: { type: 'Punctuation', behavior: 'Isolated' },
  PunctuationContiguous: { type: 'Punctuation', behavior: 'Contiguous' },
  Bert: { type: 'BertPreTokenizer' },
  Sequence: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Digits', individual_digits: true }] },
};
for (const b of ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous']) {
  for (const invert of [false, true]) {
    pretoks[`SplitRegex${b}${invert ? 'Inverted' : ''}`] =
        { type: 'Split', pattern: { Regex: '\\w+|[^\\w\\s]+' }, behavior: b, invert };
  }
  pretoks[`SplitString${b}`] = { type: 'Split', pattern: { String: ' ' }, behavior: b, invert: false };
}

// ---- decoders ----
const DEC_TOKENS = [
  ['Ġhello', 'Ġwor', 'ld', '<|im_start|>', 'Ã', '©', 'Ċ'],
  ['\u2581Hello', '\u2581world', '\u2581\u2581', 'x\u2581y'],
  ['<0x41>', '<0xC3>', '<0xA9>', 'a', '<0xE4>', '<0xB8>', 'b', '<0xFF>', '<0x41>'],
  [' hello  ', '  x ', 'y '],  // (a token of one stripped char makes HF's Strip decoder panic)
  ['hel', 'lo</w>', 'wor', 'ld</w>'],
  ['<0xE4>', '<0xB8>', '<0xAD>'],
  ['\u2581', '<0x41>', '\u2581b'],
];
const decoders = {
  ByteLevel: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  MetaspaceAlways: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true },
  MetaspaceFirst: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: true },
  MetaspaceNever: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'never', split: true },
  ByteFallback: { type: 'ByteFallback' },
  Fuse: { type: 'Fuse' },
  Strip: { type: 'Strip', content: ' ', start: 1, stop: 0 },
  StripBoth: { type: 'Strip', content: ' ', start: 2, stop: 1 },
  Replace: { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
  BPEDecoder: { type: 'BPEDecoder', suffix: '</w>' },
  Llama2: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
                                         { type: 'ByteFallback' }, { type: 'Fuse' },
                                         { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
};

// ---- whole tokenizers ----
const letters = 'abcdefghijklmnopqrstuvwxyz';
function charVocab(extra) {
  const v = {};
  let id = 0;
  const add = (t) => { if (!(t in v)) v[t] = id++; };
  ['<unk>', '<s>', '</s>'].forEach(add);
  for (let b = 0; b < 256; b++) add('<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>');
  for (const c of letters + ' .,!?\u2581') add(c);
  for (const t of extra) add(t);
  return v;
}
const MERGES = [['h', 'e'], ['l', 'l'], ['he', 'll'], ['hell', 'o'], ['\u2581', 'hello'], ['w', 'o'],
                ['r', 'l'], ['wo', 'rl'], ['worl', 'd'], ['\u2581', 'world'], ['\u2581', 'h']];
const MERGED = ['he', 'll', 'hell', 'hello', '\u2581hello', 'wo', 'rl', 'worl', 'world', '\u2581world', '\u2581h'];
function sentencePiece(opts) {
  return tokenizerJson({
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' },
                                                  { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    decoder: decoders.Llama2,
    added_tokens: [
      { id: 0, content: '<unk>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
      { id: 1, content: '<s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
      { id: 2, content: '</s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    post_processor: { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
               { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] }, '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } },
    model: Object.assign({ type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
                           end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
                           vocab: charVocab(MERGED), merges: MERGES }, opts),
  });
}
const SP_TEXTS = ['hello world', 'Hello World', 'hello   world ', '', ' ', 'héllo 中文!', 'ABC xyz', '<s>hello</s>',
                  'hello <s> world', 'αβγ'];
const wholes = {
  SentencePiece: sentencePiece({}),
  SentencePieceNoFuse: sentencePiece({ fuse_unk: false, byte_fallback: false }),
  SentencePieceNoUnk: sentencePiece({ unk_token: null, byte_fallback: false }),
  SentencePieceIgnoreMerges: sentencePiece({ ignore_merges: true }),
  SentencePieceStringMerges: sentencePiece({ merges: MERGES.map(([a, b]) => a + ' ' + b) }),
  WordPieceLike: tokenizerJson({
    pre_tokenizer: { type: 'Whitespace' },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: '##',
             end_of_word_suffix: '</w>', fuse_unk: false, byte_fallback: false, ignore_merges: false,
             vocab: { '<unk>': 0, h: 1, '##e': 2, '##l': 3, '##o</w>': 4, 'h##e': 5, '##ll': 6, 'o</w>': 7,
                      '##o': 8, w: 9, '##r': 10, '##d</w>': 11, 'he': 12, 'hel': 13 },
             merges: [['h', '##e'], ['##l', '##l']] },
    decoder: { type: 'BPEDecoder', suffix: '</w>' },
  }),
};
// Added-token flags, matched in a lowercased, byte-level pipeline.
const addedFlags = [
  { id: 300, content: '<sp>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  { id: 301, content: '[MASK]', single_word: false, lstrip: true, rstrip: true, normalized: false, special: true },
  { id: 302, content: 'word', single_word: true, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: 303, content: 'HeLLo', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: 304, content: 'LOUD', single_word: false, lstrip: false, rstrip: false, normalized: false, special: false },
  { id: 305, content: ' rs', single_word: false, lstrip: false, rstrip: true, normalized: false, special: false },
  { id: 306, content: 'ls', single_word: false, lstrip: true, rstrip: false, normalized: false, special: false },
  { id: 307, content: '<sp><sp>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
];
const byteVocab = {};
{
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  bs.forEach((b, i) => { byteVocab[String.fromCodePoint(cs[i])] = b; });
}
wholes.AddedTokenFlags = tokenizerJson({
  normalizer: { type: 'Lowercase' },
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  added_tokens: addedFlags,
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
           fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: byteVocab, merges: [] },
});
const ADDED_TEXTS = ['<sp>x', 'a  [MASK]  b', 'a[MASK]b', 'word words sword word.', 'hello HeLLo HELLO',
                     'LOUD loud Loud', 'x rs   y', 'x   ls y', '<sp><sp><sp>', 'wordword', ' word ', '[MASK]'];
const withPost = (post, extra) => Object.assign(JSON.parse(JSON.stringify(wholes.AddedTokenFlags)),
                                                { post_processor: post }, extra || {});
wholes.BertProcessing = withPost({ type: 'BertProcessing', sep: ['<sp>', 300], cls: ['[MASK]', 301] });
wholes.RobertaProcessing = withPost({ type: 'RobertaProcessing', sep: ['<sp>', 300], cls: ['[MASK]', 301],
                                      trim_offsets: true, add_prefix_space: false });
wholes.SequenceProcessing = withPost({ type: 'Sequence', processors: [
  { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
  { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<sp>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { '<sp>': { id: '<sp>', ids: [300], tokens: ['<sp>'] } } }] });
wholes.TruncateRight = withPost(null, { truncation: { direction: 'Right', max_length: 5, strategy: 'LongestFirst', stride: 0 } });
wholes.TruncateLeftWithSpecial = withPost(
  { type: 'BertProcessing', sep: ['<sp>', 300], cls: ['[MASK]', 301] },
  { truncation: { direction: 'Left', max_length: 6, strategy: 'LongestFirst', stride: 0 } });
wholes.PadFixed = withPost(null, { padding: { strategy: { Fixed: 12 }, direction: 'Left', pad_to_multiple_of: null,
                                              pad_id: 300, pad_type_id: 0, pad_token: '<sp>' } });
wholes.PadMultiple = withPost(null, { padding: { strategy: 'BatchLongest', direction: 'Right', pad_to_multiple_of: 8,
                                                 pad_id: 300, pad_type_id: 0, pad_token: '<sp>' } });
const MetaspaceFirstTok = tokenizerJson({
  pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
  decoder: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
  added_tokens: [
    { id: 1, content: '<s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
  model: sentencePiece({}).model,
});
wholes.MetaspaceFirst = MetaspaceFirstTok;

(async () => {
  for (const [name, cfg] of Object.entries(normalizers)) {
    const n = Tokenizer.fromString(JSON.stringify(tokenizerJson({ normalizer: cfg }))).getNormalizer();
    for (const input of NORM_TEXTS) emit({ kind: 'normalizer', name, config: cfg, input, expected: n.normalizeString(input) });
  }
  for (const [name, cfg] of Object.entries(pretoks)) {
    const p = Tokenizer.fromString(JSON.stringify(tokenizerJson({ pre_tokenizer: cfg }))).getPreTokenizer();
    for (const input of PRE_TEXTS) emit({ kind: 'pre_tokenizer', name, config: cfg, input,
                                          expected: p.preTokenizeString(input).map(([s]) => s) });
  }
  for (const [name, cfg] of Object.entries(decoders)) {
    const d = Tokenizer.fromString(JSON.stringify(tokenizerJson({ decoder: cfg }))).getDecoder();
    for (const input of DEC_TOKENS) emit({ kind: 'decoder', name, config: cfg, input, expected: d.decode(input) });
  }
  for (const [name, cfg] of Object.entries(wholes)) {
    const tok = Tokenizer.fromString(JSON.stringify(cfg));
    const texts = name.startsWith('SentencePiece') || name === 'MetaspaceFirst' ? SP_TEXTS
                : name === 'WordPieceLike' ? ['hello world', 'hell he ho', 'xyz', ''] : ADDED_TEXTS;
    let first = true;
    for (const input of texts) {
      const ids = Array.from((await tok.encode(input, null, { addSpecialTokens: false })).getIds());
      const ids_special = Array.from((await tok.encode(input, null, { addSpecialTokens: true })).getIds());
      emit({ kind: 'tokenizer', name, config: first ? cfg : null, input, ids, ids_special,
             decoded: await tok.decode(ids_special, false), decoded_skip: await tok.decode(ids_special, true) });
      first = false;
    }
  }
  process.stdout.write(out.join('\n') + '\n');
})();
