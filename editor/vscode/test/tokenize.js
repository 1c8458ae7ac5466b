// Tokenises .pipe files with the extension's TextMate grammar, the way VS
// Code does (vscode-textmate over vscode-oniguruma), and fails when a word
// is left with only the file's base scope (source.pipe): every name,
// number and string of a pipe file must be coloured by some rule.
//
//   node test/tokenize.js FILE.pipe...
'use strict';

const fs = require('fs');
const { loadGrammar, INITIAL } = require('./grammar');

async function main() {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error('usage: node test/tokenize.js FILE.pipe...');
    process.exit(2);
  }
  const { grammar } = await loadGrammar();
  let failures = 0;
  let words = 0;
  for (const file of files) {
    const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/);
    let state = INITIAL;
    lines.forEach((line, i) => {
      const res = grammar.tokenizeLine(line, state);
      for (const tok of res.tokens) {
        const text = line.slice(tok.startIndex, tok.endIndex);
        if (!/\S/.test(text)) continue;
        words++;
        if (tok.scopes.length === 1) {
          failures++;
          console.error(`${file}:${i + 1}:${tok.startIndex + 1}: ${JSON.stringify(text)} has only the base scope ${tok.scopes[0]}`);
        }
        if (tok.scopes.some((s) => s.startsWith('invalid.'))) {
          failures++;
          console.error(`${file}:${i + 1}:${tok.startIndex + 1}: ${JSON.stringify(text)} is marked invalid: ${tok.scopes.join(' ')}`);
        }
      }
      state = res.ruleStack;
    });
  }
  const pass = failures === 0 ? 1 : 0;
  console.log(`tokenize: ${words} tokens in ${files.length} files`);
  console.log(`${pass} passed, ${1 - pass} failed`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
