// Loads the extension's TextMate grammar the way VS Code does
// (vscode-textmate over vscode-oniguruma), optionally with a colour theme.
'use strict';

const fs = require('fs');
const path = require('path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const grammarPath = path.join(__dirname, '..', 'syntaxes', 'pipe.tmLanguage.json');

let wasmLoaded;

// loadGrammar returns the grammar of source.pipe and its registry; theme,
// when given, is a raw vscode-textmate theme ({name, settings}).
async function loadGrammar(theme) {
  if (!wasmLoaded) {
    const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm')).buffer;
    wasmLoaded = oniguruma.loadWASM(wasm);
  }
  await wasmLoaded;
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName !== 'source.pipe') return null;
      return vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath);
    },
    theme,
  });
  const grammar = await registry.loadGrammar('source.pipe');
  return { grammar, registry };
}

module.exports = { loadGrammar, INITIAL: vsctm.INITIAL };
