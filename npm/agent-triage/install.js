// agent-triage's postinstall: puts the platform package's native `triage` where this
// package's `bin` entries point (bin/triage, in place of the Node launcher), so that the
// `triage` the shell finds, and so every hook call, starts no Node (a Node start-up is tens
// of milliseconds; the binary's hook call well under one).
//
// What it does, and only this: finds @agent-triage/<os>-<cpu>/bin/triage (the optional
// dependency npm installed for this machine), links it (or, across file systems, copies it)
// beside bin/triage, runs the copy's `--version` and checks that it names this package's
// version, then renames it over bin/triage in one step. Nothing is downloaded; nothing
// outside this package's folder is written. Any failure leaves the Node launcher in place,
// which runs the same binary at the cost of a Node start-up, and the install succeeds.
//
// Only under npm (npm_config_user_agent `npm/…`): npm links a `bin` by a symbolic link to
// the file, so the file may change kind after linking. A package manager that writes a shell
// shim naming the interpreter it saw (pnpm: `exec node …/bin/triage`) would then hand the
// binary to Node; there the launcher stays.
'use strict';

const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

function main() {
  const agent = process.env.npm_config_user_agent || '';
  if (!agent.startsWith('npm/')) {
    return `not installed by npm (${agent.split(' ')[0] || 'no user agent'}): the Node launcher stays`;
  }
  const platform = `${process.platform}-${process.arch}`;
  let native;
  try {
    native = require.resolve(`@agent-triage/${platform}/bin/triage`);
  } catch {
    return `no @agent-triage/${platform} installed: the Node launcher stays`;
  }
  const version = require('./package.json').version;
  const target = path.join(__dirname, 'bin', 'triage');
  const temp = path.join(__dirname, 'bin', `.triage-${process.pid}`);
  try {
    try {
      fs.linkSync(native, temp);
    } catch {
      fs.copyFileSync(native, temp);
    }
    fs.chmodSync(temp, 0o755);
    const said = execFileSync(temp, ['--version'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 30000,
    });
    if (!said.startsWith(`triage ${version} `)) {
      throw new Error(`its --version said ${JSON.stringify(said.trim())}, not triage ${version}`);
    }
    fs.renameSync(temp, target);
  } catch (e) {
    try {
      fs.unlinkSync(temp);
    } catch {
      // Not made, or already renamed.
    }
    return `${native} not put in place (${e.message}): the Node launcher stays`;
  }
  return null;
}

try {
  const note = main();
  if (note !== null) process.stderr.write(`agent-triage: ${note}\n`);
} catch (e) {
  process.stderr.write(`agent-triage: the Node launcher stays (${e.message})\n`);
}
