#!/usr/bin/env node
// relay.mjs — a third-party Nostr relay for snapnode's interop tests:
// @nostr-relay/core's NostrRelay (event handling, NIP-01 REQ/EVENT/CLOSE,
// ephemeral forwarding, id and signature checks, NIP-40 expiration on
// arrival) served over a `ws` WebSocketServer on 127.0.0.1. The only code
// written here is the glue: the socket binding, a light shape check of
// incoming messages (the role @nostr-relay/validator plays upstream), and
// the in-memory EventRepository that the core needs for stored events.
//
//   node relay.mjs [--port N] [--data FILE] [--filter-cache-ms N] [--verbose]
//
// Prints one line {"url":"ws://127.0.0.1:PORT"} on standard output once it
// listens, logs to standard error, and exits 0 on SIGTERM or SIGINT.
//
// Behaviour worth knowing (measured, see interop/crosscheck_test.go):
//  - kind 21339 (ephemeral) is broadcast to live subscriptions, never
//    stored; kind 4339 is stored and served on REQ; kind 31337 is kept
//    newest-per-(pubkey, d).
//  - Stored queries (REQ before EOSE) go to the repository below, which
//    honours every "#<name>" tag filter, multi-letter ones (#skill, #name)
//    included.
//  - Live subscriptions (after EOSE) are matched by the core's
//    EventUtils.isMatchingFilter, which checks ids, authors, kinds, since
//    and until only: it ignores ALL tag filters, single-letter (#p, #e) and
//    multi-letter alike. Clients must re-apply their filters (nostr-tools
//    and go-nostr both do).
//  - The core caches REQ results per identical filter for
//    filterResultCacheTtl ms (library default 1000). This wrapper defaults
//    it to 0 so tests see every stored event at once; pass
//    --filter-cache-ms 1000 to get the library's behaviour.
//  - An event id seen in the last 10 minutes is answered from the core's
//    cache and not broadcast again, ephemeral events included.

import fs from 'node:fs';
import { NostrRelay } from '@nostr-relay/core';
import { EventRepository, EventType, EventUtils, LogLevel } from '@nostr-relay/common';
import { WebSocketServer } from 'ws';

function parseArgs(argv) {
  const opts = { port: 0, data: '', filterCacheMs: 0, verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') opts.port = Number(val());
    else if (a === '--data') opts.data = val();
    else if (a === '--filter-cache-ms') opts.filterCacheMs = Number(val());
    else if (a === '--verbose') opts.verbose = true;
    else if (a === '-h' || a === '--help') usage('', 0);
    else usage(`unknown argument ${a}`);
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) usage('--port: want 0..65535');
  if (!Number.isInteger(opts.filterCacheMs) || opts.filterCacheMs < 0) usage('--filter-cache-ms: want 0 or more');
  return opts;
}

function usage(msg, code = 2) {
  if (msg) process.stderr.write(`relay.mjs: ${msg}\n`);
  process.stderr.write('usage: node relay.mjs [--port N] [--data FILE] [--filter-cache-ms N] [--verbose]\n');
  process.exit(code);
}

const opts = parseArgs(process.argv.slice(2));

function log(...args) {
  process.stderr.write(
    '[relay] ' + args.map((a) => (typeof a === 'string' ? a : a instanceof Error ? a.stack : JSON.stringify(a))).join(' ') + '\n',
  );
}

// The core's default logger writes to standard output, which belongs to
// the URL line; this one writes to standard error.
const logger = {
  level: LogLevel.INFO,
  setLogLevel(l) {
    this.level = l;
  },
  debug(...a) {
    if (this.level <= LogLevel.DEBUG) log(...a);
  },
  info(...a) {
    if (this.level <= LogLevel.INFO) log(...a);
  },
  warn(...a) {
    if (this.level <= LogLevel.WARN) log(...a);
  },
  error(...a) {
    if (this.level <= LogLevel.ERROR) log(...a);
  },
};

// ------------------------------------------------------------------ storage

function tagFilterEntries(filter) {
  return Object.entries(filter).filter(([k, v]) => k.startsWith('#') && Array.isArray(v));
}

// matches applies a NIP-01 filter to a stored event. Tag filters are
// honoured for any tag name after '#', so multi-letter ones work too.
function matches(event, filter) {
  if (filter.ids && !filter.ids.includes(event.id)) return false;
  if (filter.authors && !filter.authors.includes(event.pubkey)) return false;
  if (filter.kinds && !filter.kinds.includes(event.kind)) return false;
  if (typeof filter.since === 'number' && event.created_at < filter.since) return false;
  if (typeof filter.until === 'number' && event.created_at > filter.until) return false;
  for (const [key, values] of tagFilterEntries(filter)) {
    const name = key.slice(1);
    if (!event.tags.some((t) => t[0] === name && values.includes(t[1]))) return false;
  }
  return true;
}

function newer(a, b) {
  // NIP-01: for replaceable events the latest created_at wins; on a tie,
  // the lowest id.
  return a.created_at > b.created_at || (a.created_at === b.created_at && a.id < b.id);
}

/**
 * MemoryEventRepository keeps stored events in memory, optionally
 * journalled to a JSON-lines file (--data) so that a restart on the same
 * port keeps them, as a real relay's database would.
 */
class MemoryEventRepository extends EventRepository {
  constructor(dataFile) {
    super();
    this.events = new Map(); // id → event
    this.replaceable = new Map(); // "kind:pubkey:d" → id
    this.dataFile = dataFile;
    if (dataFile && fs.existsSync(dataFile)) {
      for (const line of fs.readFileSync(dataFile, 'utf8').split('\n')) {
        if (!line) continue;
        try {
          const rec = JSON.parse(line);
          if (rec.op === 'upsert') this.apply(rec.event);
          else if (rec.op === 'delete') this.applyDeletion(rec.event);
        } catch (e) {
          log('skipping a bad journal line:', e.message);
        }
      }
      log(`loaded ${this.events.size} stored events from ${dataFile}`);
    }
  }

  journal(op, event) {
    if (this.dataFile) fs.appendFileSync(this.dataFile, JSON.stringify({ op, event }) + '\n');
  }

  isSearchSupported() {
    return false;
  }

  // apply stores event and reports whether it was new.
  apply(event) {
    if (this.events.has(event.id)) return false;
    const type = EventUtils.getType(event.kind);
    if (type === EventType.REPLACEABLE || type === EventType.PARAMETERIZED_REPLACEABLE) {
      const key = `${event.kind}:${event.pubkey}:${EventUtils.extractDTagValue(event) ?? ''}`;
      const oldId = this.replaceable.get(key);
      const old = oldId && this.events.get(oldId);
      if (old && !newer(event, old)) return false;
      if (old) this.events.delete(oldId);
      this.replaceable.set(key, event.id);
    }
    this.events.set(event.id, event);
    return true;
  }

  upsert(event) {
    const fresh = this.apply(event);
    if (fresh) this.journal('upsert', event);
    return { isDuplicate: !fresh };
  }

  find(filter) {
    const now = Math.floor(Date.now() / 1000);
    let out = [];
    for (const ev of this.events.values()) {
      const exp = EventUtils.extractExpirationTimestamp(ev);
      if (exp && exp < now) continue; // NIP-40: never serve an expired event
      if (matches(ev, filter)) out.push(ev);
    }
    out.sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? -1 : 1));
    if (typeof filter.limit === 'number') out = out.slice(0, Math.max(0, filter.limit));
    return out;
  }

  applyDeletion(request) {
    // NIP-09: delete the events named by e tags that the same author made.
    for (const t of request.tags) {
      if (t[0] !== 'e') continue;
      const ev = this.events.get(t[1]);
      if (ev && ev.pubkey === request.pubkey) this.events.delete(t[1]);
    }
  }

  async deleteByDeletionRequest(request) {
    this.applyDeletion(request);
    this.journal('delete', request);
  }

  async destroy() {}
}

// ------------------------------------------------------------------ wire

const HEX64 = /^[0-9a-f]{64}$/;
const HEX128 = /^[0-9a-f]{128}$/;

function isEvent(e) {
  return (
    e !== null &&
    typeof e === 'object' &&
    typeof e.id === 'string' &&
    HEX64.test(e.id) &&
    typeof e.pubkey === 'string' &&
    HEX64.test(e.pubkey) &&
    Number.isSafeInteger(e.created_at) &&
    e.created_at >= 0 &&
    Number.isSafeInteger(e.kind) &&
    e.kind >= 0 &&
    e.kind <= 65535 &&
    Array.isArray(e.tags) &&
    e.tags.every((t) => Array.isArray(t) && t.every((s) => typeof s === 'string')) &&
    typeof e.content === 'string' &&
    typeof e.sig === 'string' &&
    HEX128.test(e.sig)
  );
}

function isFilter(f) {
  return f !== null && typeof f === 'object' && !Array.isArray(f);
}

// checkMessage returns an error string for a malformed client message.
function checkMessage(msg) {
  if (!Array.isArray(msg) || typeof msg[0] !== 'string') return 'invalid: not a JSON array with a type';
  switch (msg[0]) {
    case 'EVENT':
    case 'AUTH':
      return msg.length === 2 && isEvent(msg[1]) ? null : `invalid: malformed ${msg[0]} event`;
    case 'REQ':
      if (typeof msg[1] !== 'string' || msg[1].length < 1 || msg[1].length > 64) return 'invalid: bad subscription id';
      return msg.length >= 3 && msg.slice(2).every(isFilter) ? null : 'invalid: REQ needs filter objects';
    case 'CLOSE':
      return msg.length === 2 && typeof msg[1] === 'string' ? null : 'invalid: bad CLOSE';
    default:
      return `invalid: unknown message type ${msg[0]}`;
  }
}

const repository = new MemoryEventRepository(opts.data);
const relay = new NostrRelay(repository, {
  logger,
  logLevel: opts.verbose ? LogLevel.DEBUG : LogLevel.WARN,
  filterResultCacheTtl: opts.filterCacheMs,
});

const wss = new WebSocketServer({ host: '127.0.0.1', port: opts.port, maxPayload: 16 << 20 });

wss.on('connection', (ws, req) => {
  relay.handleConnection(ws, req.socket.remoteAddress);
  // Handle one client's messages in order: the core's handlers are
  // async, and a REQ must be registered before a later EVENT from the same
  // connection is broadcast.
  let chain = Promise.resolve();
  ws.on('message', (data, isBinary) => {
    const text = isBinary ? null : data.toString('utf8');
    chain = chain.then(async () => {
      let msg;
      try {
        msg = JSON.parse(text);
      } catch {
        ws.send(JSON.stringify(['NOTICE', 'invalid: message is not JSON']));
        return;
      }
      const bad = checkMessage(msg);
      if (bad) {
        if (msg?.[0] === 'EVENT' && typeof msg[1]?.id === 'string') ws.send(JSON.stringify(['OK', msg[1].id, false, bad]));
        else ws.send(JSON.stringify(['NOTICE', bad]));
        return;
      }
      if (opts.verbose) log('<-', text.length > 300 ? text.slice(0, 300) + '…' : text);
      try {
        await relay.handleMessage(ws, msg);
      } catch (e) {
        log('handleMessage failed:', e);
        ws.send(JSON.stringify(['NOTICE', 'error: ' + e.message]));
      }
    });
  });
  ws.on('close', () => relay.handleDisconnect(ws));
  ws.on('error', (e) => log('socket error:', e.message));
});

wss.on('error', (e) => {
  log('server error:', e.message);
  process.exit(1);
});

wss.on('listening', () => {
  const { port } = wss.address();
  process.stdout.write(JSON.stringify({ url: `ws://127.0.0.1:${port}` }) + '\n');
});

let stopping = false;
function stop(sig) {
  if (stopping) return;
  stopping = true;
  log(`${sig}: closing`);
  for (const c of wss.clients) c.terminate();
  wss.close(() => {
    relay.destroy().finally(() => process.exit(0));
  });
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
