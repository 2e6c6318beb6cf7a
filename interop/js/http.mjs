// http.mjs — the HTTP, SSE and WebSocket side of the independent client:
// it talks to a SNAP endpoint the way the TypeScript SDK's HttpTransport
// and WebSocketTransport do (SPEC-NOTES 1.13–1.15 and 4.3), and checks
// every reply as a careful requester must. Built on Node's fetch and the
// `ws` package; it shares no code with the Go side.

import WebSocket from 'ws';
import { schnorr } from '@noble/curves/secp256k1.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { hexToBytes, utf8ToBytes } from '@noble/hashes/utils.js';
import * as snap from './snap.mjs';

const STREAM_METHODS = new Set(['message/stream', 'tasks/resubscribe']);

const nowSec = () => Math.floor(Date.now() / 1000);

/**
 * checkMessage verifies one message received for request: the envelope
 * and signature (required), the type wanted, from = the target, to = us,
 * the method echoed, the timestamp within the window.
 */
export function checkMessage(msg, request, target, myAddress, wantType) {
  const checks = {};
  const reasons = {};
  const set = (name, ok, reason) => {
    checks[name] = !!ok;
    if (!ok) reasons[name] = reason;
  };
  const v = snap.verifyMessage(msg);
  set('envelope', v.ok || (v.reason ?? '').startsWith('sig:'), v.reason);
  set('sig', v.ok && v.signed, v.ok ? 'not signed' : v.reason);
  set('type', msg?.type === wantType, `type ${JSON.stringify(msg?.type)}, want ${wantType}`);
  set('from', msg?.from === target, `from ${msg?.from} is not ${target}`);
  set('to', msg?.to === myAddress, `to ${msg?.to} is not ${myAddress}`);
  set('method', msg?.method === request.method, `method ${msg?.method} is not ${request.method}`);
  const drift = Math.abs(nowSec() - (msg?.timestamp ?? 0));
  set('timestamp', drift <= snap.MAX_CLOCK_DRIFT, `timestamp ${drift} s from now`);
  const failures = Object.keys(checks).filter((k) => !checks[k]);
  return { verified: failures.length === 0, failures, reasons };
}

/**
 * parseSSE splits a text/event-stream body into its data payloads and
 * checks the framing snapnode promises SDK readers: LF only, each event
 * exactly one `data: ` line (one space) and a blank line, nothing else.
 */
export function parseSSE(body) {
  const problems = [];
  if (body.includes('\r')) problems.push('CR in the stream (LF only expected)');
  const datas = [];
  const blocks = body.split('\n\n');
  const tail = blocks.pop();
  if (tail !== '') problems.push(`stream does not end with a blank line: ${JSON.stringify(tail.slice(0, 80))}`);
  for (const block of blocks) {
    const lines = block.split('\n');
    if (lines.length !== 1) problems.push(`an event of ${lines.length} lines`);
    for (const line of lines) {
      if (!line.startsWith('data: ')) {
        problems.push(`a line that is not "data: …": ${JSON.stringify(line.slice(0, 80))}`);
        continue;
      }
      datas.push(line.slice('data: '.length));
    }
  }
  return { datas, problems };
}

/** streamChecks checks the order of a stream's messages: events, then exactly one final response. */
function streamChecks(msgs) {
  const problems = [];
  const finals = msgs.filter((m) => m?.type === 'response').length;
  if (finals !== 1) problems.push(`${finals} final responses, want exactly 1`);
  if (msgs.length > 0 && msgs[msgs.length - 1]?.type !== 'response') problems.push('the last message is not the response');
  let last = -1;
  for (const m of msgs) {
    const v = m?.payload?.version;
    if (m?.type === 'event' && Number.isInteger(v)) {
      if (v < last) problems.push(`event version ${v} after ${last}`);
      last = v;
    }
  }
  return problems;
}

async function readBody(res, timeoutMs) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error('time-out reading the body');
    let timer;
    const chunk = await Promise.race([
      reader.read(),
      new Promise((_, rej) => {
        timer = setTimeout(() => rej(new Error('time-out reading the body')), left);
      }),
    ]);
    clearTimeout(timer);
    if (chunk.done) break;
    text += dec.decode(chunk.value, { stream: true });
  }
  return text + dec.decode();
}

/**
 * request sends one signed request over transport (http, sse or ws) and
 * returns {messages, status, contentType, problems}.
 */
export async function request({ url, transport, request: msg, timeoutMs }) {
  const body = JSON.stringify(msg);
  if (transport === 'http' || transport === 'sse') {
    const headers = { 'Content-Type': 'application/json' }; // the SDK sends nothing else
    if (transport === 'sse') headers.Accept = 'text/event-stream';
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), timeoutMs);
    try {
      const res = await fetch(url, { method: 'POST', headers, body, signal: ctl.signal });
      const text = await readBody(res, timeoutMs);
      const contentType = res.headers.get('content-type') ?? '';
      const out = { status: res.status, contentType, snapVersion: res.headers.get('snap-version'), problems: [], messages: [] };
      if (transport === 'http') {
        out.messages.push(JSON.parse(text));
        return out;
      }
      const { datas, problems } = parseSSE(text);
      out.problems.push(...problems);
      for (const d of datas) out.messages.push(JSON.parse(d));
      return out;
    } finally {
      clearTimeout(timer);
    }
  }
  if (transport !== 'ws') throw new Error(`unknown transport ${transport}`);
  // One connection per request, as the SDK's WebSocketTransport.
  return await new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const out = { status: 101, contentType: 'websocket', problems: [], messages: [] };
    const stream = STREAM_METHODS.has(msg.method);
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error('time-out waiting for frames'));
    }, timeoutMs);
    ws.on('open', () => ws.send(body));
    ws.on('message', (data, isBinary) => {
      if (isBinary) out.problems.push('a binary frame');
      const m = JSON.parse(data.toString());
      out.messages.push(m);
      if (!stream || m.type === 'response') {
        // The SDK takes the first frame for a non-stream method; wait a
        // moment to catch any stray frame after it.
        setTimeout(() => {
          clearTimeout(timer);
          ws.close();
          resolve(out);
        }, stream ? 0 : 200);
      }
    });
    ws.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/**
 * discover fetches base/.well-known/snap-agent.json and verifies it as
 * SPEC-NOTES 1.13 says: JCS(card) | timestamp, SHA-256, BIP-340 against
 * publicKey, and publicKey = Q(card.identity).
 */
export async function discover(base, timeoutMs) {
  const url = base.replace(/\/$/, '') + '/.well-known/snap-agent.json';
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  let res;
  try {
    res = await fetch(url, { signal: ctl.signal });
  } finally {
    clearTimeout(timer);
  }
  const signed = await res.json();
  const checks = {};
  const set = (k, ok) => {
    checks[k] = !!ok;
  };
  set('status', res.status === 200);
  set('contentType', (res.headers.get('content-type') ?? '').startsWith('application/json'));
  set('cors', res.headers.get('access-control-allow-origin') === '*');
  set('shape', signed && typeof signed.card === 'object' && /^[0-9a-f]{128}$/.test(signed.sig) &&
    /^[0-9a-f]{64}$/.test(signed.publicKey) && Number.isSafeInteger(signed.timestamp));
  let sigOK = false;
  let keyOK = false;
  if (checks.shape) {
    const input = snap.canonicalize(signed.card) + '|' + String(signed.timestamp);
    const digest = sha256(utf8ToBytes(input));
    try {
      sigOK = schnorr.verify(hexToBytes(signed.sig), digest, hexToBytes(signed.publicKey));
    } catch {
      sigOK = false;
    }
    try {
      keyOK = snap.decodeP2TR(signed.card.identity).outputKey === signed.publicKey;
    } catch {
      keyOK = false;
    }
  }
  set('signature', sigOK);
  set('identityKey', keyOK);
  const failures = Object.keys(checks).filter((k) => !checks[k]);
  return { url, signed, checks, failures, verified: failures.length === 0 };
}

/** cmdHttpRequest is `http-request`: see the client's help. */
export async function cmdHttpRequest(flags, { keysFlag, jsonFlag, intFlag, need, out, defaultPayload }) {
  const me = flags.secret ? keysFlag(flags) : snap.keysFromSecret(snap.randomSecret());
  const target = need(flags, 'to-address');
  const transport = flags.transport ?? 'http';
  const method = flags.method ?? 'message/send';
  const payload = flags.payload !== undefined ? jsonFlag(flags, 'payload') : defaultPayload(method);
  const msg = snap.signMessage(snap.buildMessage({ from: me.address, to: target, method, payload }), me, 'random');
  const res = await request({ url: need(flags, 'url'), transport, request: msg, timeoutMs: intFlag(flags, 'timeout-ms', 30000) });
  let ok = res.problems.length === 0;
  const stream = STREAM_METHODS.has(method) && transport !== 'http';
  const order = stream ? streamChecks(res.messages) : res.messages.length === 1 ? [] : [`${res.messages.length} frames, want exactly 1`];
  ok &&= order.length === 0;
  if (transport !== 'ws') ok &&= res.status === 200;
  for (const m of res.messages) {
    const c = checkMessage(m, msg, target, me.address, m?.type === 'event' ? 'event' : 'response');
    ok &&= c.verified;
    out({ transport, message: m, verified: c.verified, failures: c.failures, reasons: c.reasons });
  }
  out({ transport, status: res.status, contentType: res.contentType, snapVersion: res.snapVersion ?? null,
    frames: res.messages.length, framing: res.problems, order, ok });
  return ok ? 0 : 1;
}

/** cmdHttpDiscover is `http-discover`. */
export async function cmdHttpDiscover(flags, { need, intFlag, out }) {
  const r = await discover(need(flags, 'url'), intFlag(flags, 'timeout-ms', 10000));
  out(r);
  return r.verified ? 0 : 1;
}
