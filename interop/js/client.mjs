#!/usr/bin/env node
// client.mjs — the independent SNAP client the Go interop tests drive. It
// behaves on the wire like the TypeScript SDK's NostrTransport (SPEC-NOTES
// 1.12 and Part 4) and checks replies the way 4.4 says a requester must.
// Every command prints JSON lines on standard output; diagnostics go to
// standard error. Run `node client.mjs help` for the flags.
//
// Exit codes: 0 success; 1 a check failed (a reply failed verification, a
// message did not verify, decryption failed); 2 usage error; 3 time-out
// waiting for a reply; 4 no relay could be reached or none accepted the
// event.

import fs from 'node:fs';
import WebSocket from 'ws';
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay';
import { matchFilters } from 'nostr-tools/filter';
import * as snap from './snap.mjs';
import { cmdHttpRequest, cmdHttpDiscover } from './http.mjs';

useWebSocketImplementation(WebSocket);

const EXIT_OK = 0;
const EXIT_FAIL = 1;
const EXIT_USAGE = 2;
const EXIT_TIMEOUT = 3;
const EXIT_RELAY = 4;

const MUTATIONS = ['bad-sig', 'stale', 'dup', 'bad-field', 'unknown-method', 'wrong-from', 'wrong-to'];

const HELP = `usage: node client.mjs COMMAND [flags]

Any flag value given as "-" is read from standard input (one flag at most).
Every command prints JSON lines on standard output.

  keys --secret HEX
      {"secret","internalKey","nostrPubkey","tweakedSecret","outputKey","address","testnetAddress"}

  sign --secret HEX --message JSON [--aux zero|random|HEX] [--testnet] [--explain]
      Fills absent fields (id = UUID v4, version 0.1, from = our address,
      type request, timestamp now), signs with d' and prints the message.
      --explain prints {"message","canonicalPayload","signatureInputHex","digest",…}.

  verify --message JSON [--now UNIX] [--max-drift S]
      {"ok","reason","signed","digest"}; exit 1 when not ok. The timestamp
      window is checked only with --now or --max-drift (then now = the clock).

  nip44-encrypt --secret HEX --pubkey HEX --plaintext STR [--nonce HEX] [--allow-extended]
      {"ciphertext","conversationKey"}
  nip44-decrypt --secret HEX --pubkey HEX --ciphertext STR
      {"plaintext","conversationKey"}; exit 1 when it does not open.

  card-event --secret HEX --card JSON [--created-at UNIX] [--relay URL]...
      The kind-31337 event as the SDK builds it (a card without identity
      gets the key's mainnet address); with --relay, published
      there and followed by {"published":[{"relay","ok","message"}]}.

  discover --relay URL [--relay URL]... [--identity ADDR] [--skill ID]... [--name NAME] [--timeout-ms N]
      Queries kind 31337 as the SDK's discoverAgents does and prints
      {"event","card","binding"} per card (binding: P2TR(tweak(pubkey)) ==
      card.identity == d tag), newest first, one per identity.

  request --relay URL [--relay URL]... --to-pubkey HEX [--to-address ADDR]
          [--secret HEX] [--method M] [--payload JSON] [--id ID] [--no-to]
          [--persist] [--timeout-ms N] [--linger-ms N] [--aux zero|random|HEX]
          [--no-wait-eose] [--mutate ${MUTATIONS.join('|')}]
      Sends one signed SNAP request over Nostr as the SDK does and waits
      for the reply. Prints {"sent":…} per request event, then one line per
      reply: {"attempt","event":{kind,tags,pubkey,created_at,id},
      "response","verified","checks","failures","reasons"}. Exit 0 when
      every attempt got a verified response, 1 when a reply failed
      verification, 3 on time-out, 4 when no relay took the event.

  http-request --url URL --to-address ADDR [--secret HEX] [--transport http|sse|ws]
               [--method M] [--payload JSON] [--timeout-ms N]
      One signed request the way the SDK's HttpTransport (http: POST with
      only Content-Type; sse: Accept: text/event-stream, read to EOF) or
      WebSocketTransport (ws: a connection per request; the first frame,
      or frames up to the response for stream methods) sends it. Prints
      {"message","verified","failures"} per message received, then
      {"status","contentType","snapVersion","frames","framing","order","ok"}.
      Exit 0 when every message verified, the framing is exact and a
      stream is events then exactly one response; else 1.

  http-discover --url BASE [--timeout-ms N]
      Fetches BASE/.well-known/snap-agent.json and verifies it (JCS(card)
      "|" timestamp, SHA-256, BIP-340 against publicKey, publicKey = Q of
      card.identity). Prints {"url","signed","checks","failures","verified"}.
`;

// ------------------------------------------------------------------ flags

class UsageError extends Error {}

const BOOLEAN_FLAGS = new Set(['persist', 'explain', 'testnet', 'no-to', 'allow-extended', 'no-wait-eose', 'help']);
const REPEATED_FLAGS = new Set(['relay', 'skill']);

function parseFlags(argv) {
  const flags = { relay: [], skill: [] };
  let stdinUsed = false;
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument ${a}`);
    a = a.slice(2);
    let value;
    const eq = a.indexOf('=');
    if (eq >= 0) {
      value = a.slice(eq + 1);
      a = a.slice(0, eq);
    }
    if (BOOLEAN_FLAGS.has(a)) {
      flags[a] = value === undefined ? true : value !== 'false';
      continue;
    }
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new UsageError(`--${a} needs a value`);
      value = argv[++i];
    }
    if (value === '-') {
      if (stdinUsed) throw new UsageError('only one flag may read standard input');
      stdinUsed = true;
      value = fs.readFileSync(0, 'utf8').replace(/\r?\n$/, '');
    }
    if (REPEATED_FLAGS.has(a)) flags[a].push(value);
    else flags[a] = value;
  }
  return flags;
}

function need(flags, name) {
  if (flags[name] === undefined || flags[name] === '') throw new UsageError(`--${name} is required`);
  return flags[name];
}

function jsonFlag(flags, name) {
  const raw = need(flags, name);
  try {
    return JSON.parse(raw);
  } catch (e) {
    throw new UsageError(`--${name}: not JSON: ${e.message}`);
  }
}

function intFlag(flags, name, def) {
  if (flags[name] === undefined) return def;
  const n = Number(flags[name]);
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`--${name}: want a non-negative integer`);
  return n;
}

function keysFlag(flags, name = 'secret') {
  try {
    return snap.keysFromSecret(need(flags, name));
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`--${name}: ${e.message}`);
  }
}

function pubkeyFlag(flags, name) {
  const v = need(flags, name);
  if (!/^[0-9a-f]{64}$/.test(v)) throw new UsageError(`--${name}: want 64 lowercase hex characters`);
  return v;
}

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function warn(...args) {
  process.stderr.write('[client] ' + args.join(' ') + '\n');
}

const nowSec = () => Math.floor(Date.now() / 1000);

// ------------------------------------------------------------------ offline commands

function cmdKeys(flags) {
  const k = keysFlag(flags);
  out({
    secret: k.secret,
    internalKey: k.internalKey,
    nostrPubkey: k.nostrPubkey,
    tweakedSecret: k.tweakedSecret,
    outputKey: k.outputKey,
    address: k.address,
    testnetAddress: k.testnetAddress,
  });
  return EXIT_OK;
}

function cmdSign(flags) {
  const k = keysFlag(flags);
  const given = jsonFlag(flags, 'message');
  if (given === null || typeof given !== 'object' || Array.isArray(given)) throw new UsageError('--message: want a JSON object');
  const { sig: _drop, ...rest } = given;
  const msg = snap.buildMessage({ ...rest, from: rest.from ?? (flags.testnet ? k.testnetAddress : k.address) });
  if (typeof msg.method !== 'string') throw new UsageError('--message: method is required');
  snap.signMessage(msg, k, flags.aux ?? 'zero');
  if (!flags.explain) {
    out(msg);
    return EXIT_OK;
  }
  out({
    message: msg,
    canonicalPayload: snap.canonicalize(msg.payload),
    signatureInputHex: snap.bytesToHex(snap.signatureInput(msg)),
    digest: snap.bytesToHex(snap.messageDigest(msg)),
    internalKey: k.internalKey,
    outputKey: k.outputKey,
    tweakedSecret: k.tweakedSecret,
  });
  return EXIT_OK;
}

function cmdVerify(flags) {
  const msg = jsonFlag(flags, 'message');
  const opts = {};
  if (flags.now !== undefined || flags['max-drift'] !== undefined) {
    opts.now = intFlag(flags, 'now', nowSec());
    opts.maxDrift = intFlag(flags, 'max-drift', snap.MAX_CLOCK_DRIFT);
  }
  const r = snap.verifyMessage(msg, opts);
  out(r);
  return r.ok ? EXIT_OK : EXIT_FAIL;
}

function cmdNip44Encrypt(flags) {
  const k = keysFlag(flags);
  const pub = pubkeyFlag(flags, 'pubkey');
  const plaintext = need(flags, 'plaintext');
  try {
    const ciphertext = snap.nip44Encrypt(plaintext, k.secret, pub, {
      nonce: flags.nonce,
      allowExtended: !!flags['allow-extended'],
    });
    out({ ciphertext, conversationKey: snap.bytesToHex(snap.conversationKey(k.secret, pub)) });
    return EXIT_OK;
  } catch (e) {
    out({ error: e.message });
    return EXIT_FAIL;
  }
}

function cmdNip44Decrypt(flags) {
  const k = keysFlag(flags);
  const pub = pubkeyFlag(flags, 'pubkey');
  const ciphertext = need(flags, 'ciphertext');
  try {
    const plaintext = snap.nip44Decrypt(ciphertext, k.secret, pub);
    out({ plaintext, conversationKey: snap.bytesToHex(snap.conversationKey(k.secret, pub)) });
    return EXIT_OK;
  } catch (e) {
    out({ error: e.message });
    return EXIT_FAIL;
  }
}

// ------------------------------------------------------------------ relays

async function connectAll(urls, timeoutMs = 5000) {
  if (urls.length === 0) throw new UsageError('--relay is required');
  const relays = [];
  await Promise.all(
    urls.map(async (url) => {
      try {
        const r = await Relay.connect(url, { timeout: timeoutMs });
        r.onnotice = (m) => warn(`NOTICE from ${url}: ${m}`);
        relays.push(r);
      } catch (e) {
        warn(`cannot connect to ${url}: ${e?.message ?? e}`);
      }
    }),
  );
  return relays;
}

async function publishAll(relays, event) {
  return Promise.all(
    relays.map(async (r) => {
      try {
        const message = await r.publish(event);
        return { relay: r.url, ok: true, message: message ?? '' };
      } catch (e) {
        return { relay: r.url, ok: false, message: String(e?.message ?? e) };
      }
    }),
  );
}

function closeAll(relays) {
  for (const r of relays) {
    try {
      r.close();
    } catch {
      // closing is best effort
    }
  }
}

function eventSummary(ev) {
  return { kind: ev.kind, tags: ev.tags, pubkey: ev.pubkey, created_at: ev.created_at, id: ev.id };
}

async function cmdCardEvent(flags) {
  const k = keysFlag(flags);
  let card = jsonFlag(flags, 'card');
  if (card === null || typeof card !== 'object' || Array.isArray(card)) throw new UsageError('--card: want a JSON object');
  // Like the Go side's PrepareCard: a card without identity gets ours.
  if (!card.identity) card = { ...card, identity: k.address };
  for (const f of ['name', 'version']) {
    if (typeof card[f] !== 'string') throw new UsageError(`--card: ${f} must be a string (it becomes a tag)`);
  }
  const ev = snap.cardEvent(card, k.secret, { created_at: flags['created-at'] !== undefined ? intFlag(flags, 'created-at') : undefined });
  out(ev);
  if (flags.relay.length === 0) return EXIT_OK;
  const relays = await connectAll(flags.relay);
  const published = relays.length ? await publishAll(relays, ev) : [];
  closeAll(relays);
  out({ published });
  return published.some((p) => p.ok) ? EXIT_OK : EXIT_RELAY;
}

// querySync subscribes until EOSE (or the timeout) and returns the events.
function querySync(relay, filter, timeoutMs) {
  return new Promise((resolve) => {
    const events = [];
    const timer = setTimeout(() => {
      sub.close();
      resolve(events);
    }, timeoutMs);
    const sub = relay.subscribe([filter], {
      onevent: (ev) => events.push(ev),
      oneose: () => {
        clearTimeout(timer);
        sub.close();
        resolve(events);
      },
    });
  });
}

async function cmdDiscover(flags) {
  const filter = { kinds: [snap.KIND_CARD] };
  if (flags.identity) filter['#d'] = [flags.identity];
  if (flags.skill.length) filter['#skill'] = flags.skill;
  if (flags.name) filter['#name'] = [flags.name];
  const timeoutMs = intFlag(flags, 'timeout-ms', 10000);
  const relays = await connectAll(flags.relay);
  if (relays.length === 0) return EXIT_RELAY;
  const seen = new Map();
  for (const r of relays) {
    for (const ev of await querySync(r, filter, timeoutMs)) seen.set(ev.id, ev);
  }
  closeAll(relays);
  // Newest first, one per identity, as a client caching identity → pubkey would keep.
  const byIdentity = new Map();
  for (const ev of [...seen.values()].sort((a, b) => b.created_at - a.created_at)) {
    let card = null;
    try {
      card = JSON.parse(ev.content);
    } catch {
      card = null;
    }
    const d = ev.tags.find((t) => t[0] === 'd')?.[1];
    const key = card?.identity ?? d ?? ev.id;
    if (byIdentity.has(key)) continue;
    let binding = false;
    try {
      const addr = snap.addressOfPubkey(ev.pubkey);
      binding = card !== null && card.identity === addr && d === addr;
    } catch {
      binding = false;
    }
    byIdentity.set(key, true);
    out({ event: ev, card, binding });
  }
  return EXIT_OK;
}

// ------------------------------------------------------------------ request

// The checks a reply must pass (SPEC-NOTES 4.4); the others are reported
// but do not decide `verified`.
const REQUIRED_CHECKS = [
  'eventId',
  'eventSig',
  'author',
  'tagP',
  'tagE',
  'since',
  'decrypt',
  'json',
  'envelope',
  'type',
  'sig',
  'from',
  'fromBinding',
  'to',
  'timestamp',
];
const INFORMATIONAL_CHECKS = ['kind', 'method'];

/**
 * checkReply verifies one reply event. ctx: {me (keys whose P the reply
 * is addressed to and whose secret opens it), myAddresses (acceptable `to`
 * values), requestEvent, request, target {pubkey, address}, since}.
 */
function checkReply(ev, ctx) {
  const checks = {};
  const reasons = {};
  const set = (name, ok, reason) => {
    checks[name] = !!ok;
    if (!ok && reason) reasons[name] = reason;
  };
  const nostr = snap.checkEvent(ev);
  set('eventId', nostr.id, 'event id is not the NIP-01 hash');
  set('eventSig', nostr.sig, 'event signature does not verify');
  set('author', ev.pubkey === ctx.target.pubkey, `event pubkey ${ev.pubkey} is not the target's`);
  set('kind', ev.kind === ctx.requestEvent.kind, `reply kind ${ev.kind} differs from the request's ${ctx.requestEvent.kind}`);
  set('tagP', ev.tags.some((t) => t[0] === 'p' && t[1] === ctx.me.nostrPubkey), 'no ["p", our pubkey] tag');
  set('tagE', ev.tags.some((t) => t[0] === 'e' && t[1] === ctx.requestEvent.id), 'no ["e", request event id] tag');
  set('since', ev.created_at >= ctx.since, `created_at ${ev.created_at} is before since ${ctx.since}`);

  let response = null;
  let plaintext = null;
  try {
    plaintext = snap.nip44Decrypt(ev.content, ctx.me.secret, ev.pubkey);
    set('decrypt', true);
  } catch (e) {
    set('decrypt', false, 'NIP-44: ' + e.message);
  }
  if (plaintext !== null) {
    try {
      response = JSON.parse(plaintext);
      set('json', response !== null && typeof response === 'object' && !Array.isArray(response), 'plaintext is not a JSON object');
    } catch (e) {
      set('json', false, 'plaintext is not JSON: ' + e.message);
      response = plaintext;
    }
  } else {
    set('json', false, 'nothing decrypted');
  }

  const msg = checks.json ? response : null;
  if (msg) {
    const v = snap.verifyMessage(msg);
    const sigProblem = !v.ok && v.reason.startsWith('sig:');
    set('envelope', v.ok || sigProblem, v.reason);
    set('sig', v.ok && v.signed, v.ok ? 'response is not signed (required over Nostr)' : v.reason);
    set('type', msg.type === 'response', `type is ${JSON.stringify(msg.type)}`);
    set('from', msg.from === ctx.target.address, `from ${msg.from} is not the target ${ctx.target.address}`);
    let bound = null;
    try {
      bound = snap.addressOfPubkey(ev.pubkey);
    } catch {
      bound = null;
    }
    set('fromBinding', bound !== null && msg.from === bound, `from is not the mainnet P2TR of the event pubkey (${bound})`);
    set('to', ctx.myAddresses.includes(msg.to), `to ${msg.to} is not ours (${ctx.myAddresses.join(' or ')})`);
    const drift = Math.abs(nowSec() - msg.timestamp);
    set('timestamp', Number.isSafeInteger(msg.timestamp) && drift <= snap.MAX_CLOCK_DRIFT, `timestamp is ${drift} s from now`);
    set('method', msg.method === ctx.request.method, `method ${msg.method} is not the request's ${ctx.request.method}`);
  } else {
    for (const name of ['envelope', 'sig', 'type', 'from', 'fromBinding', 'to', 'timestamp', 'method']) {
      set(name, false, 'no SNAP message');
    }
  }
  const failures = REQUIRED_CHECKS.filter((c) => !checks[c]);
  return { checks, reasons, failures, response, verified: failures.length === 0 };
}

/** defaultPayload is what a bare `request --method message/send` sends. */
function defaultPayload(method) {
  if (method !== 'message/send' && method !== 'message/stream') return {};
  return {
    message: {
      messageId: crypto.randomUUID(),
      role: 'user',
      parts: [{ text: 'hello from the snapnode JS interop client' }],
    },
  };
}

async function cmdRequest(flags) {
  const me = flags.secret ? keysFlag(flags) : snap.keysFromSecret(snap.randomSecret());
  const toPubkey = pubkeyFlag(flags, 'to-pubkey');
  const toAddress = flags['to-address'] ?? snap.addressOfPubkey(toPubkey);
  try {
    snap.decodeP2TR(toAddress);
  } catch (e) {
    throw new UsageError(`--to-address: ${e.message}`);
  }
  const mutation = flags.mutate;
  if (mutation !== undefined && !MUTATIONS.includes(mutation)) throw new UsageError(`--mutate: want one of ${MUTATIONS.join(', ')}`);
  const method = flags.method ?? 'message/send';
  const payload = flags.payload !== undefined ? jsonFlag(flags, 'payload') : defaultPayload(method);
  const timeoutMs = intFlag(flags, 'timeout-ms', 30000);
  const lingerMs = intFlag(flags, 'linger-ms', 0);
  const persist = !!flags.persist;

  // Build and sign the SNAP request, then apply the mutation.
  let request = snap.buildMessage({
    id: flags.id,
    from: me.address,
    to: flags['no-to'] ? undefined : toAddress,
    type: 'request',
    method,
    payload,
  });
  let signer = me; // the Nostr key that signs the event and receives the reply
  switch (mutation) {
    case 'stale':
      request.timestamp -= 120;
      break;
    case 'bad-field':
      request.id = 'msg@' + crypto.randomUUID().slice(0, 8);
      break;
    case 'unknown-method':
      request.method = 'foo/bar';
      break;
    case 'wrong-to':
      request.to = snap.keysFromSecret(snap.randomSecret()).address;
      break;
    case 'wrong-from':
      signer = snap.keysFromSecret(snap.randomSecret());
      break;
    default:
      break;
  }
  snap.signMessage(request, me, flags.aux ?? 'zero');
  if (mutation === 'bad-sig') {
    const s = request.sig;
    request.sig = (s[0] === '0' ? '1' : '0') + s.slice(1);
  }

  const relays = await connectAll(flags.relay);
  if (relays.length === 0) {
    out({ error: 'no relay reachable', relays: flags.relay });
    return EXIT_RELAY;
  }

  const attempts = mutation === 'dup' ? 2 : 1;
  const ctxBase = {
    me: signer,
    myAddresses: mutation === 'wrong-from' ? [me.address, signer.address] : [me.address],
    request,
    target: { pubkey: toPubkey, address: toAddress },
  };
  let sawFailure = false;
  let sawTimeout = false;
  let relayFailure = false;

  for (let attempt = 1; attempt <= attempts; attempt++) {
    const result = await sendAndWait(relays, {
      ...ctxBase,
      attempt,
      persist,
      timeoutMs,
      lingerMs: attempt === attempts ? lingerMs : 0,
      mutation,
      waitEose: !flags['no-wait-eose'],
    });
    sawFailure ||= result.failed;
    sawTimeout ||= result.timedOut;
    relayFailure ||= result.relayFailure;
    if (result.relayFailure) break;
  }
  closeAll(relays);
  if (relayFailure) return EXIT_RELAY;
  if (sawFailure) return EXIT_FAIL;
  if (sawTimeout) return EXIT_TIMEOUT;
  return EXIT_OK;
}

/**
 * sendAndWait wraps the request in a fresh Nostr event, subscribes for the
 * reply before publishing (as the SDK does; here also waiting for EOSE so
 * the relay has registered the subscription), publishes, and waits for the
 * first reply (then lingerMs more).
 */
async function sendAndWait(relays, ctx) {
  const { me, request, target, attempt, persist, timeoutMs, lingerMs, mutation, waitEose } = ctx;
  const since = nowSec() - 5; // the SDK's responseLookbackSeconds
  const requestEvent = snap.messageEvent(request, me.secret, target.pubkey, { persist });
  const filter = {
    kinds: [snap.KIND_MESSAGE, snap.KIND_MESSAGE_PERSIST],
    '#p': [me.nostrPubkey],
    '#e': [requestEvent.id],
    since,
  };
  const full = { ...ctx, requestEvent, since };

  let decided = false;
  let failed = false;
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const seen = new Set();
  let lingerTimer;
  // Reply lines wait until the {"sent"} line is out, so output order is
  // fixed even when a reply beats the relay's OK.
  let held = [];
  const emit = (line) => (held ? held.push(line) : out(line));

  const onReply = (ev) => {
    if (seen.has(ev.id)) return;
    seen.add(ev.id);
    const r = checkReply(ev, full);
    if (!r.verified) failed = true;
    emit({
      attempt,
      event: eventSummary(ev),
      response: r.response,
      verified: r.verified,
      checks: r.checks,
      failures: r.failures,
      reasons: r.reasons,
      ...(decided ? { extra: true } : {}),
    });
    if (!decided) {
      decided = true;
      if (lingerMs > 0) lingerTimer = setTimeout(() => resolveDone('reply'), lingerMs);
      else resolveDone('reply');
    }
  };
  const onInvalid = (ev) => {
    // nostr-tools drops events that fail its filter or verifyEvent. An
    // event that matches our filter but fails verification is a bad
    // reply; anything else is traffic the relay over-delivered (the
    // third-party relay ignores tag filters on live subscriptions).
    if (ev && matchFilters([filter], ev)) onReply(ev);
    else if (ev?.pubkey === target.pubkey) warn(`ignored event ${ev.id} from the target: it does not match the reply filter`);
  };

  const subs = [];
  const eoses = [];
  for (const r of relays) {
    let eose;
    eoses.push(new Promise((resolve) => (eose = resolve)));
    const timer = setTimeout(eose, 3000);
    subs.push(
      r.subscribe([filter], {
        onevent: onReply,
        oninvalidevent: onInvalid,
        oneose: () => {
          clearTimeout(timer);
          eose();
        },
        eoseTimeout: 3000,
      }),
    );
  }
  // The SDK publishes right after sending its REQ; by default this client
  // also waits for EOSE (at most 3 s) so the relay has registered the
  // subscription before the reply can come.
  if (waitEose) await Promise.all(eoses);

  const published = await publishAll(relays, requestEvent);
  out({
    sent: {
      attempt,
      mutation: mutation ?? null,
      event: eventSummary(requestEvent),
      request,
      from: request.from,
      nostrPubkey: me.nostrPubkey,
      since,
      published,
    },
  });
  for (const line of held) out(line);
  held = null;
  if (!published.some((p) => p.ok)) {
    for (const s of subs) s?.close();
    return { failed: false, timedOut: false, relayFailure: true };
  }

  const timer = setTimeout(() => resolveDone('timeout'), timeoutMs);
  const how = await done;
  clearTimeout(timer);
  clearTimeout(lingerTimer);
  for (const s of subs) s?.close();
  if (how === 'timeout') {
    warn(`attempt ${attempt}: no reply to event ${requestEvent.id} within ${timeoutMs} ms`);
    out({ attempt, timeout: true, requestEventId: requestEvent.id, waitedMs: timeoutMs });
  }
  return { failed, timedOut: how === 'timeout', relayFailure: false };
}

// ------------------------------------------------------------------ main

const COMMANDS = {
  keys: cmdKeys,
  sign: cmdSign,
  verify: cmdVerify,
  'nip44-encrypt': cmdNip44Encrypt,
  'nip44-decrypt': cmdNip44Decrypt,
  'card-event': cmdCardEvent,
  discover: cmdDiscover,
  request: cmdRequest,
  'http-request': (flags) => cmdHttpRequest(flags, { keysFlag, jsonFlag, intFlag, need, out, defaultPayload }),
  'http-discover': (flags) => cmdHttpDiscover(flags, { need, intFlag, out }),
};

async function main(argv) {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(HELP);
    return name ? EXIT_OK : EXIT_USAGE;
  }
  const cmd = COMMANDS[name];
  if (!cmd) throw new UsageError(`unknown command ${name}`);
  return await cmd(parseFlags(rest));
}

// exit leaves once standard output and error are flushed: writes to a pipe
// are asynchronous, and process.exit would cut a long line short.
function exit(code) {
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
}

main(process.argv.slice(2)).then(exit, (e) => {
  if (e instanceof UsageError) {
    process.stderr.write(`client.mjs: ${e.message}\n(node client.mjs help lists the commands)\n`);
    exit(EXIT_USAGE);
    return;
  }
  process.stderr.write(`client.mjs: ${e?.stack ?? e}\n`);
  exit(EXIT_FAIL);
});
