// snap.mjs — an independent JavaScript implementation of the SNAP v0.1
// client-side primitives, built only from npm packages (@noble/curves,
// @noble/hashes, @scure/base, nostr-tools). It shares no code with the Go
// side and exists so snapnode's tests can check the Go implementation
// against a second one, written the way the TypeScript SDK does things.
//
// Contents: keys (BIP-340 internal key P, BIP-341 TapTweak, tweaked secret
// d', output key Q, bech32m P2TR addresses), RFC 8785 canonical JSON, the
// 7-field signature input, signing and verification, a message builder,
// NIP-44 v2, Nostr events (signed with the untweaked key) and the kind-31337
// card event.

import { schnorr, secp256k1 } from '@noble/curves/secp256k1.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, hexToBytes, randomBytes, utf8ToBytes } from '@noble/hashes/utils.js';
import { bech32m } from '@scure/base';
import * as nip44 from 'nostr-tools/nip44';
import { finalizeEvent, getEventHash, verifyEvent } from 'nostr-tools/pure';

export { bytesToHex, hexToBytes };

// Nostr kinds SNAP uses (SPEC-NOTES 1.12).
export const KIND_MESSAGE = 21339; // ephemeral: forwarded, not stored
export const KIND_MESSAGE_PERSIST = 4339; // regular: stored by relays
export const KIND_CARD = 31337; // addressable Agent Card

export const PROTOCOL_VERSION = '0.1';
export const MAX_CLOCK_DRIFT = 60; // seconds, inclusive
export const NIP44_MAX_PLAINTEXT = 65535; // bytes, standard NIP-44 v2

const Point = secp256k1.Point;
const N = Point.Fn.ORDER;

const HEX64 = /^[0-9a-f]{64}$/;
const SIG_HEX = /^[0-9a-f]{128}$/;
const ID_RE = /^[a-zA-Z0-9_-]+$/;
const METHOD_RE = /^[a-z]+\/[a-z_]+$/;
const VERSION_RE = /^\d+\.\d+$/;

function bytesToBig(b) {
  return BigInt('0x' + bytesToHex(b));
}

function bigToBytes32(n) {
  return hexToBytes(n.toString(16).padStart(64, '0'));
}

// ---------------------------------------------------------------- keys

/**
 * keysFromSecret derives everything a SNAP agent needs from a 32-byte
 * secret given as 64 hex characters:
 *   secret        d, the untweaked secret (Nostr events, NIP-44)
 *   internalKey   P, x-only hex: the Nostr pubkey
 *   tweakedSecret d' = (d or n-d, so that P has even y) + t mod n, t = TapTweak(P)
 *   outputKey     Q = P + t·G, x-only hex: what the address encodes
 *   address       mainnet bc1p… (testnetAddress: tb1p…)
 */
export function keysFromSecret(secretHex) {
  if (typeof secretHex !== 'string' || !HEX64.test(secretHex.toLowerCase())) {
    throw new Error('secret must be 64 hex characters');
  }
  const secret = hexToBytes(secretHex.toLowerCase());
  let d = bytesToBig(secret);
  if (d === 0n || d >= N) throw new Error('secret is not in [1, n-1]');
  const P = schnorr.getPublicKey(secret); // BIP-340 x-only
  if (Point.BASE.multiply(d).toAffine().y & 1n) d = N - d;
  const t = bytesToBig(schnorr.utils.taggedHash('TapTweak', P)); // key path only: no merkle root
  if (t >= N) throw new Error('TapTweak is not below the curve order');
  const dT = (d + t) % N;
  if (dT === 0n) throw new Error('tweaked secret is zero');
  const Qpoint = schnorr.utils.lift_x(bytesToBig(P)).add(Point.BASE.multiply(t));
  const Q = schnorr.utils.pointToBytes(Qpoint);
  const tweakedSecret = bigToBytes32(dT);
  // BIP-340 signing negates d' itself when Q has odd y, so x(d'·G) must be Q.
  if (bytesToHex(schnorr.getPublicKey(tweakedSecret)) !== bytesToHex(Q)) {
    throw new Error('internal error: tweaked secret does not match the output key');
  }
  return {
    secret: bytesToHex(secret),
    secretBytes: secret,
    internalKey: bytesToHex(P),
    nostrPubkey: bytesToHex(P),
    tweakedSecret: bytesToHex(tweakedSecret),
    tweakedSecretBytes: tweakedSecret,
    outputKey: bytesToHex(Q),
    address: encodeP2TR(Q, 'mainnet'),
    testnetAddress: encodeP2TR(Q, 'testnet'),
  };
}

/** randomSecret returns a fresh secret key as hex. */
export function randomSecret() {
  return bytesToHex(schnorr.utils.randomSecretKey());
}

/** encodeP2TR encodes a 32-byte output key as a bech32m witness-v1 address. */
export function encodeP2TR(outputKey, network = 'mainnet') {
  const q = typeof outputKey === 'string' ? hexToBytes(outputKey) : outputKey;
  if (q.length !== 32) throw new Error('output key must be 32 bytes');
  const hrp = network === 'testnet' ? 'tb' : network === 'mainnet' ? 'bc' : null;
  if (!hrp) throw new Error(`unknown network ${network}`);
  return bech32m.encode(hrp, [1, ...bech32m.toWords(q)]);
}

/**
 * decodeP2TR parses a P2TR address and returns {network, outputKey (hex)},
 * or throws with the rule it breaks. Rules: lowercase, bc1p/tb1p, 62
 * characters, bech32m checksum, witness version 1, zero padding, 32 bytes,
 * and an x coordinate on the curve.
 */
export function decodeP2TR(addr) {
  if (typeof addr !== 'string') throw new Error('address is not a string');
  if (addr !== addr.toLowerCase()) throw new Error('address must be lowercase');
  if (!addr.startsWith('bc1') && !addr.startsWith('tb1')) throw new Error('address must start with bc1 or tb1');
  if (addr.length !== 62) throw new Error('address must be 62 characters');
  let dec;
  try {
    dec = bech32m.decode(addr);
  } catch (e) {
    throw new Error('bad bech32m: ' + e.message);
  }
  if (dec.words[0] !== 1) throw new Error('not witness version 1');
  let prog;
  try {
    prog = bech32m.fromWords(dec.words.slice(1)); // rejects non-zero padding
  } catch (e) {
    throw new Error('bad program: ' + e.message);
  }
  if (prog.length !== 32) throw new Error('program is not 32 bytes');
  try {
    schnorr.utils.lift_x(bytesToBig(prog));
  } catch {
    throw new Error('program is not an x coordinate on secp256k1');
  }
  return { network: dec.prefix === 'tb' ? 'testnet' : 'mainnet', outputKey: bytesToHex(prog) };
}

/** addressOfPubkey maps a Nostr pubkey P to its P2TR address, as the SDK's publicKeyToP2TR does (mainnet by default). */
export function addressOfPubkey(pubkeyHex, network = 'mainnet') {
  if (!HEX64.test(pubkeyHex)) throw new Error('pubkey must be 64 lowercase hex characters');
  const P = hexToBytes(pubkeyHex);
  const t = bytesToBig(schnorr.utils.taggedHash('TapTweak', P));
  if (t >= N) throw new Error('TapTweak is not below the curve order');
  const Q = schnorr.utils.lift_x(bytesToBig(P)).add(Point.BASE.multiply(t));
  return encodeP2TR(schnorr.utils.pointToBytes(Q), network);
}

// ---------------------------------------------------------------- JCS

/**
 * canonicalize serializes a parsed JSON value per RFC 8785 (JCS), as the
 * npm `canonicalize` package the SDK uses does: object members sorted by
 * UTF-16 code units, no whitespace, strings as JSON.stringify writes them
 * (only ", \ and U+0000..U+001F escaped, short forms where they exist,
 * lowercase \u00xx), numbers by ECMAScript Number#toString (so -0 is 0,
 * 1e21 is 1e+21), undefined members dropped.
 */
export function canonicalize(v) {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(v)) throw new Error('JCS: non-finite number');
      return Object.is(v, -0) ? '0' : String(v);
    case 'string':
      return JSON.stringify(v);
    case 'object':
      if (Array.isArray(v)) {
        return '[' + v.map((x) => (x === undefined ? 'null' : canonicalize(x))).join(',') + ']';
      }
      {
        const keys = Object.keys(v)
          .filter((k) => v[k] !== undefined)
          .sort(); // default sort compares UTF-16 code units
        return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalize(v[k])).join(',') + '}';
      }
    default:
      throw new Error(`JCS: cannot serialize ${typeof v}`);
  }
}

// ---------------------------------------------------------------- signing

/**
 * signatureInput returns the exact signed bytes: 7 fields joined by 6 NULs,
 * id, from, to ("" when absent), type, method, JCS(payload), timestamp.
 */
export function signatureInput(msg) {
  const fields = [
    msg.id,
    msg.from,
    msg.to ?? '',
    msg.type,
    msg.method,
    canonicalize(msg.payload),
    String(msg.timestamp),
  ];
  return utf8ToBytes(fields.join('\0'));
}

/** messageDigest is SHA-256 of the signature input: the BIP-340 message. */
export function messageDigest(msg) {
  return sha256(signatureInput(msg));
}

function auxBytes(aux) {
  if (aux === undefined || aux === null || aux === 'zero') return new Uint8Array(32);
  if (aux === 'random') return randomBytes(32);
  if (aux instanceof Uint8Array) return aux;
  if (typeof aux === 'string' && HEX64.test(aux)) return hexToBytes(aux);
  throw new Error('aux must be "zero", "random" or 64 hex characters');
}

/**
 * signMessage signs msg in place with the tweaked secret d' and returns it.
 * aux is the BIP-340 auxiliary randomness: "zero" (default, as the SDK's
 * Signer and the published vectors), "random", or 32 bytes / 64 hex.
 */
export function signMessage(msg, keys, aux = 'zero') {
  const sig = schnorr.sign(messageDigest(msg), keys.tweakedSecretBytes, auxBytes(aux));
  msg.sig = bytesToHex(sig);
  return msg;
}

/**
 * buildMessage returns an envelope with the SDK's member order. Absent
 * fields get defaults: a UUID v4 id, version 0.1, type request, timestamp
 * now. `to` is left out when undefined.
 */
export function buildMessage({ id, version, from, to, type, method, payload, timestamp, ...extra }) {
  const m = {
    id: id ?? crypto.randomUUID(),
    version: version ?? PROTOCOL_VERSION,
    from,
  };
  if (to !== undefined) m.to = to;
  m.type = type ?? 'request';
  m.method = method;
  m.payload = payload ?? {};
  m.timestamp = timestamp ?? Math.floor(Date.now() / 1000);
  Object.assign(m, extra);
  return m;
}

/**
 * verifyMessage checks a parsed SNAP message: envelope shape and field
 * rules, the addresses, optionally the timestamp window (opts.now, in unix
 * seconds, with opts.maxDrift), and the signature against Q(from).
 * Returns {ok, reason, signed, digest}. A response or event without sig
 * is ok with signed:false; a request without sig is not.
 */
export function verifyMessage(msg, opts = {}) {
  const fail = (reason, extra = {}) => ({ ok: false, reason, signed: false, ...extra });
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return fail('message is not an object');
  for (const f of ['id', 'version', 'from', 'type', 'method']) {
    if (typeof msg[f] !== 'string') return fail(`${f}: missing or not a string`);
  }
  if (msg.id.length < 1 || msg.id.length > 128 || !ID_RE.test(msg.id)) return fail('id: does not match ^[a-zA-Z0-9_-]{1,128}$');
  if (!VERSION_RE.test(msg.version)) return fail('version: does not match ^\\d+\\.\\d+$');
  if (!['request', 'response', 'event'].includes(msg.type)) return fail('type: not request, response or event');
  if (msg.method.length > 64 || !METHOD_RE.test(msg.method)) return fail('method: does not match ^[a-z]+/[a-z_]+$');
  if (msg.payload === null || typeof msg.payload !== 'object' || Array.isArray(msg.payload)) {
    return fail('payload: missing or not an object');
  }
  if (!Number.isSafeInteger(msg.timestamp) || msg.timestamp < 0) return fail('timestamp: not a non-negative integer');
  let from;
  try {
    from = decodeP2TR(msg.from);
  } catch (e) {
    return fail('from: ' + e.message);
  }
  if (msg.to !== undefined) {
    if (typeof msg.to !== 'string') return fail('to: not a string');
    try {
      const to = decodeP2TR(msg.to);
      if (to.network !== from.network) return fail('to: on another network than from');
    } catch (e) {
      return fail('to: ' + e.message);
    }
  }
  if (opts.now !== undefined) {
    const drift = Math.abs(opts.now - msg.timestamp);
    const max = opts.maxDrift ?? MAX_CLOCK_DRIFT;
    if (drift > max) return fail(`timestamp: ${drift} s from now, more than ${max} s`);
  }
  const digest = bytesToHex(messageDigest(msg));
  if (msg.sig === undefined) {
    if (msg.type === 'request') return fail('sig: missing (a request must be signed)', { digest });
    return { ok: true, reason: null, signed: false, digest };
  }
  if (typeof msg.sig !== 'string' || !SIG_HEX.test(msg.sig)) return fail('sig: not 128 lowercase hex characters', { digest });
  let valid = false;
  try {
    valid = schnorr.verify(hexToBytes(msg.sig), hexToBytes(digest), hexToBytes(from.outputKey));
  } catch {
    valid = false;
  }
  if (!valid) return fail('sig: does not verify against the output key of from', { digest });
  return { ok: true, reason: null, signed: true, digest };
}

// ---------------------------------------------------------------- NIP-44

/** conversationKey is NIP-44 v2's key from our untweaked secret and their P. */
export function conversationKey(secretHex, pubkeyHex) {
  return nip44.getConversationKey(hexToBytes(secretHex), pubkeyHex);
}

/**
 * nip44Encrypt seals plaintext with NIP-44 v2. Plaintexts over 65 535 bytes
 * are refused unless opts.allowExtended: nostr-tools 2.25 would otherwise
 * use an extended length prefix that standard NIP-44 v2 peers (the SDK's
 * nostr-tools, go-nostr) cannot open.
 */
export function nip44Encrypt(plaintext, secretHex, pubkeyHex, opts = {}) {
  const len = utf8ToBytes(plaintext).length;
  if (len > NIP44_MAX_PLAINTEXT && !opts.allowExtended) {
    throw new Error(`NIP-44 plaintext is ${len} bytes; at most ${NIP44_MAX_PLAINTEXT} allowed`);
  }
  const ck = conversationKey(secretHex, pubkeyHex);
  return opts.nonce ? nip44.v2.encrypt(plaintext, ck, hexToBytes(opts.nonce)) : nip44.v2.encrypt(plaintext, ck);
}

/** nip44Decrypt opens a NIP-44 v2 payload from pubkeyHex to us. */
export function nip44Decrypt(payload, secretHex, pubkeyHex) {
  return nip44.v2.decrypt(payload, conversationKey(secretHex, pubkeyHex));
}

// ---------------------------------------------------------------- Nostr events

/** signEvent finalizes a Nostr event with the UNTWEAKED secret d (pubkey = P). */
export function signEvent({ kind, tags = [], content = '', created_at }, secretHex) {
  return finalizeEvent(
    { kind, tags, content, created_at: created_at ?? Math.floor(Date.now() / 1000) },
    hexToBytes(secretHex),
  );
}

/**
 * checkEvent verifies a Nostr event's id and signature on a fresh copy (so
 * nostr-tools' cached verdict on the object does not hide anything).
 */
export function checkEvent(ev) {
  const copy = JSON.parse(JSON.stringify(ev));
  let idOk = false;
  try {
    idOk = getEventHash(copy) === ev.id;
  } catch {
    idOk = false;
  }
  const sigOk = idOk && verifyEvent(copy);
  return { id: idOk, sig: sigOk };
}

/**
 * messageEvent wraps a signed SNAP message as the SDK's NostrTransport.send
 * does: kind 21339 (4339 when persist), tags [["p", recipientP]], content
 * NIP-44 v2 of JSON.stringify(message), signed with the untweaked secret.
 * extraTags are appended (the SDK adds none; a responder adds ["e", id]).
 */
export function messageEvent(message, secretHex, recipientPubkey, { persist = false, extraTags = [], created_at } = {}) {
  const content = nip44Encrypt(JSON.stringify(message), secretHex, recipientPubkey);
  return signEvent(
    {
      kind: persist ? KIND_MESSAGE_PERSIST : KIND_MESSAGE,
      tags: [['p', recipientPubkey], ...extraTags],
      content,
      created_at,
    },
    secretHex,
  );
}

/**
 * cardEvent builds the kind-31337 Agent Card event as the SDK's
 * publishAgentCard does: tags d (identity), name, version, then
 * ["skill", id, name]×N, ["endpoint", protocol, url]×N, ["relay", url]×N;
 * content JSON.stringify(card) (not JCS); created_at now; no expiration.
 */
export function cardEvent(card, secretHex, { created_at } = {}) {
  const tags = [
    ['d', card.identity],
    ['name', card.name],
    ['version', card.version],
  ];
  for (const s of card.skills ?? []) tags.push(['skill', s.id, s.name]);
  for (const e of card.endpoints ?? []) tags.push(['endpoint', e.protocol, e.url]);
  for (const r of card.nostrRelays ?? []) tags.push(['relay', r]);
  return signEvent({ kind: KIND_CARD, tags, content: JSON.stringify(card), created_at }, secretHex);
}
