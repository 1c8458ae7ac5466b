// The pipe extension: syntax highlighting comes from the grammar alone;
// everything else (diagnostics, completion, hover with memory, formatting)
// from `pipe lsp`, started when the pipe command is found, and started
// again when the pipe.server settings change.
'use strict';

const fs = require('fs');
const path = require('path');
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;
// queue orders starts and stops, so settings changed twice in a row
// cannot leave two servers running.
let queue = Promise.resolve();

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

// startClient starts the language server with the settings in force.
async function startClient() {
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
  await client.start();
}

async function stopClient() {
  const running = client;
  client = undefined;
  if (running) await running.stop();
}

// restart stops the server and starts it again with the settings now in
// force; it resolves when the new one is up (or none could start).
function restart() {
  queue = queue
    .then(stopClient)
    .then(startClient)
    .catch((err) => {
      vscode.window.showErrorMessage(`pipe: the language server did not restart: ${(err && err.message) || err}`);
    });
  return queue;
}

async function activate(context) {
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('pipe.server')) return restart();
      return undefined;
    }),
    { dispose: () => stopClient() },
  );
  queue = queue.then(startClient);
  await queue;
}

function deactivate() {
  queue = queue.catch(() => {}).then(stopClient);
  return queue;
}

module.exports = { activate, deactivate, findCommand };
