// Colours every token class of the grammar with VS Code's stock themes
// Dark+ and Light+ (Dark Modern and Light Modern use their token colours),
// as VS Code does (vscode-textmate resolves each token's scopes against the
// theme's rules), and fails when a class is left the editor's plain colour
// or when settings, arguments and names share one colour. The themes come
// from the pinned tm-themes package, which ships VS Code's own.
//
//   node test/themes.js
'use strict';

const { loadGrammar, INITIAL } = require('./grammar');

const themes = ['dark-plus', 'light-plus'];

const sample = [
  'pipeline demo',
  'source scene geotiff {',
  '  tile 64x64 stride 48',
  '}',
  'model net {',
  '  input [3, 64, 64]',
  '  x = conv 32 k3 -> relu',
  '  add x -> resnet18 classes 10',
  '}',
  'train { optimizer adam lr 1e-3  source scene  batch auto }',
];

// Each class is found by the text of one of its words: on the line, after
// the column given.
const classes = {
  'block keyword': [1, 'source'],
  'block name': [1, 'scene'],
  'source kind': [1, 'geotiff'],
  setting: [2, 'tile'],
  argument: [2, 'stride'],
  'glued argument': [6, 'k3'],
  value: [9, 'adam'],
  name: [9, 'scene'],
  label: [6, 'x'],
  layer: [6, 'conv'],
  family: [7, 'resnet18'],
  number: [2, '48'],
  size: [2, '64x64'],
  auto: [9, 'auto'],
};

// Foreground colour id bits of a token's metadata (vscode-textmate's
// EncodedTokenAttributes).
const foreground = (metadata) => (metadata & 0x00ff8000) >>> 15;

function rawTheme(name) {
  const t = require(`tm-themes/themes/${name}.json`);
  return {
    name,
    // VS Code puts the editor's colours first, as the rule without a scope.
    settings: [
      { settings: { foreground: t.colors['editor.foreground'], background: t.colors['editor.background'] } },
      ...t.tokenColors,
    ],
  };
}

async function colours(name) {
  const { grammar, registry } = await loadGrammar(rawTheme(name));
  const colorMap = registry.getColorMap();
  const lines = [];
  let state = INITIAL;
  for (const line of sample) {
    const res = grammar.tokenizeLine2(line, state);
    lines.push(res.tokens);
    state = res.ruleStack;
  }
  const out = {};
  for (const [cls, [ln, word]] of Object.entries(classes)) {
    const col = sample[ln].indexOf(word);
    if (col < 0) throw new Error(`${word} is not on line ${ln}`);
    const toks = lines[ln];
    let meta;
    for (let i = 0; i < toks.length; i += 2) {
      if (toks[i] <= col) meta = toks[i + 1];
    }
    out[cls] = colorMap[foreground(meta)].toUpperCase();
  }
  // The rule without a scope, the editor's colours, is the first colour.
  const plain = colorMap[1].toUpperCase();
  const editor = require(`tm-themes/themes/${name}.json`).colors['editor.foreground'].toUpperCase();
  if (plain !== editor) throw new Error(`${name}: plain colour ${plain}, the editor's is ${editor}`);
  return { out, plain };
}

async function main() {
  let failures = 0;
  const fail = (msg) => {
    failures++;
    console.error(msg);
  };
  for (const name of themes) {
    const { out, plain } = await colours(name);
    console.log(`${name}: ${Object.entries(out).map(([c, v]) => `${c} ${v}`).join(', ')}`);
    for (const [cls, colour] of Object.entries(out)) {
      if (colour === plain) fail(`${name}: ${cls} is the plain text colour ${plain}`);
    }
    const apart = ['setting', 'argument', 'name'];
    for (let i = 0; i < apart.length; i++) {
      for (let j = i + 1; j < apart.length; j++) {
        if (out[apart[i]] === out[apart[j]]) fail(`${name}: ${apart[i]} and ${apart[j]} share the colour ${out[apart[i]]}`);
      }
    }
    for (const other of ['name', 'argument']) {
      if (out.value === out[other]) fail(`${name}: value and ${other} share the colour ${out.value}`);
    }
  }
  const pass = failures === 0 ? 1 : 0;
  console.log(`${pass} passed, ${1 - pass} failed`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
