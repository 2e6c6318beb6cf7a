#!/usr/bin/env node
// A snapnode external worker: it writes the task into a report, then reports COMPLETED.
//
// The node writes JSON lines to standard input (the job request, then one observation
// after each answer) and reads one JSON line a step from standard output. Each line
// the node writes names its step; each answer names the step it answers, so that the
// node never takes a late line for the answer to another step. Node.js
// standard library only. Configure it with
// agent.command = ["node", "/path/to/write_then_finish.js"].
'use strict';
const readline = require('node:readline');
const { randomUUID } = require('node:crypto');

const REPORT = '/sandbox/report.md';
// Each answer names the step of the line it answers.
const answer = (step, obj) => process.stdout.write(JSON.stringify({ ...obj, step }) + '\n');

let request = null;
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line);
  if (request === null) { // the job request
    request = msg;
    answer(msg.step, {
      schema_version: '1.0.0',
      id: randomUUID(),
      reasoning: 'write the task into the report',
      action: 'WRITE_FILE',
      args: { path: REPORT, content: '# Report\n\n' + request.task_description + '\n' },
    });
    return;
  }
  if (msg.observation.includes('"outcome":"completed"')) { // one observation a step
    answer(msg.step, { action: 'COMPLETED', evidence_files: [REPORT], summary_for_supervisor: 'The report is written.' });
  } else {
    answer(msg.step, { action: 'STUCK', evidence_files: [], summary_for_supervisor: 'The write was refused: ' + msg.observation.slice(0, 400) });
  }
});
