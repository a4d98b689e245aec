// Helpers for the Node end-to-end tests of `pipit serve` (server_openai_test.js, chat_page_test.js).
'use strict';
const { spawn } = require('node:child_process');

// Starts `pipit serve -m MODEL --port 0 -t 1 ARGS...`; resolves with {proc, url, log()} once it prints its
// "listening on" line (one compute thread: ctest runs tests side by side).
function startServer(pipit, model, args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(pipit, ['serve', '-m', model, '--port', '0', '-t', '1', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    const timer = setTimeout(() => reject(new Error('pipit serve did not start:\n' + log)), 120000);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1], log: () => log });
      }
    });
    proc.on('exit', (code) => reject(new Error(`pipit serve exited with ${code}:\n${log}`)));
  });
}

// SIGTERM; resolves with the exit {code, signal}.
function stopServer(srv) {
  return new Promise((resolve) => {
    srv.proc.removeAllListeners('exit');
    srv.proc.on('exit', (code, signal) => resolve({ code, signal }));
    srv.proc.kill('SIGTERM');
  });
}

module.exports = { startServer, stopServer };
