// The pipe extension: syntax highlighting comes from the grammar alone;
// everything else (diagnostics, completion, hover with memory, formatting)
// from `pipe lsp`, started when the pipe command is found.
'use strict';

const fs = require('fs');
const path = require('path');
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

// findCommand resolves a command name on the PATH (with PATHEXT on
// Windows), or checks a path; it returns undefined when there is none.
function findCommand(command) {
  const isFile = (p) => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (command.includes('/') || command.includes('\\')) {
    return isFile(command) ? command : undefined;
  }
  const exts = process.platform === 'win32' ? (process.env.PATHEXT || '.EXE').split(';') : [''];
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, command + ext);
      if (isFile(candidate)) return candidate;
    }
  }
  return undefined;
}

async function activate(context) {
  const config = vscode.workspace.getConfiguration('pipe');
  const command = config.get('server.path', 'pipe');
  const logLevel = config.get('server.logLevel', 'warn');
  const resolved = findCommand(command);
  if (!resolved) {
    vscode.window.showInformationMessage(
      `pipe: '${command}' is not on the PATH, so only highlighting is on. ` +
        'Install pipe (make build puts it in bin/) or set pipe.server.path.');
    return;
  }
  client = new LanguageClient(
    'pipe',
    'pipe language server',
    { command: resolved, args: ['--log-level', logLevel, '--no-color', 'lsp'] },
    { documentSelector: [{ language: 'pipe' }], outputChannelName: 'pipe' },
  );
  context.subscriptions.push(client);
  await client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate, findCommand };
