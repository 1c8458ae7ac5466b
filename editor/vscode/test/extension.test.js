// Tests of extension.js under node's test runner, with stand-ins for the
// vscode module and the language client: the server starts with the
// pipe.server settings and starts again when they change.
//
//   node --test test/extension.test.js
'use strict';

const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const test = require('node:test');
const Module = require('node:module');

const settings = new Map();
const listeners = [];
const messages = [];
const clients = [];

class FakeClient {
  constructor(id, name, serverOptions) {
    this.command = serverOptions.command;
    this.args = serverOptions.args;
    this.running = false;
    clients.push(this);
  }

  async start() {
    this.running = true;
  }

  async stop() {
    this.running = false;
  }
}

const fakeVscode = {
  workspace: {
    getConfiguration: (section) => ({
      get: (key, def) => (settings.has(`${section}.${key}`) ? settings.get(`${section}.${key}`) : def),
    }),
    onDidChangeConfiguration: (listener) => {
      listeners.push(listener);
      return { dispose: () => listeners.splice(listeners.indexOf(listener), 1) };
    },
  },
  window: {
    showInformationMessage: (m) => messages.push(m),
    showErrorMessage: (m) => messages.push(m),
  },
};

const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === 'vscode') return fakeVscode;
  if (request === 'vscode-languageclient/node') return { LanguageClient: FakeClient };
  return load.call(this, request, ...rest);
};
const extension = require('../extension.js');

// change sets settings and tells the extension, as VS Code does, for a
// change of the given setting; it waits for what the extension does.
async function change(key, value) {
  settings.set(key, value);
  const event = { affectsConfiguration: (s) => key === s || key.startsWith(`${s}.`) };
  await Promise.all(listeners.map((l) => l(event)));
}

function fakePipe(dir, name) {
  const p = path.join(dir, name);
  fs.writeFileSync(p, '#!/bin/sh\n');
  fs.chmodSync(p, 0o755);
  return p;
}

const running = () => clients.filter((c) => c.running);

test('the server restarts when pipe.server changes', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pipe-ext-'));
  const first = fakePipe(dir, 'pipe-one');
  const second = fakePipe(dir, 'pipe-two');
  settings.set('pipe.server.path', first);
  const context = { subscriptions: [] };
  await extension.activate(context);
  assert.deepStrictEqual(running().map((c) => c.command), [first]);

  await change('pipe.server.path', second);
  assert.strictEqual(clients.length, 2);
  assert.strictEqual(clients[0].running, false, 'the old server was not stopped');
  assert.deepStrictEqual(running().map((c) => c.command), [second]);

  await change('pipe.server.logLevel', 'debug');
  assert.deepStrictEqual(running().map((c) => [c.command, c.args[1]]), [[second, 'debug']]);

  await change('editor.fontSize', 20);
  assert.strictEqual(clients.length, 3, 'another setting restarted the server');

  // Two changes in a row leave one server, with the last setting.
  settings.set('pipe.server.path', first);
  const event = { affectsConfiguration: (s) => s === 'pipe.server' };
  await Promise.all([...listeners.map((l) => l(event)), ...listeners.map((l) => l(event))]);
  assert.deepStrictEqual(running().map((c) => c.command), [first]);

  await change('pipe.server.path', path.join(dir, 'missing'));
  assert.deepStrictEqual(running(), []);
  assert.match(messages[messages.length - 1], /is not on the PATH/);

  await change('pipe.server.path', second);
  assert.deepStrictEqual(running().map((c) => c.command), [second]);

  await extension.deactivate();
  assert.deepStrictEqual(running(), []);
  for (const d of context.subscriptions) d.dispose();
  fs.rmSync(dir, { recursive: true });
});
