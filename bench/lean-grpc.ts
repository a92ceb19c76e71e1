/**
 * A lean gRPC client for the load generator: unary and client-streaming calls over HTTP/2 on a
 * plain TCP socket, framed here (RFC 9113) rather than by node:http2, whose client costs as much
 * CPU per call as the server it measures, on the two CPUs they share. It is to gRPC what
 * LeanHttpConnection (lib.ts) is to REST: it sends what any gRPC client sends and checks every
 * answer, at a fraction of the CPU.
 *
 * What it does of HTTP/2: the preface and SETTINGS (no server push); HEADERS + CONTINUATION,
 * padding; flow control both ways (the server's windows and MAX_FRAME_SIZE bound what it sends;
 * its own windows are opened wide and topped up); PING answered; RST_STREAM and GOAWAY fail the
 * calls they end. What a tick sends goes in one write.
 *
 * Header fields are coded as gRPC's clients code them (grpc-js through nghttp2, the C core,
 * grpc-go): one HPACK dynamic table each way, of 4096 bytes. A request's fields go as literals with
 * incremental indexing the first time and as one-byte indexes after (HpackEncoder); the server's
 * blocks are decoded in order with hpack.js (Huffman included), a block of indexed fields only
 * looked up by its bytes. Until 2026-11-24 this client sent every field as a literal without
 * indexing and asked for HEADER_TABLE_SIZE 0: no real client does that, and it cost the server
 * more per call (about 4 µs in bench:transport; see bench/README.md). BENCH_GRPC_HPACK=literal
 * keeps that coding.
 */
import net from "node:net";
import hpack from "hpack.js";
import hpackStatic from "hpack.js/lib/hpack/static-table.js";

/** One message in a gRPC envelope (uncompressed). */
export function envelope(message: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(5 + message.byteLength);
  b[0] = 0;
  b.writeUInt32BE(message.byteLength, 1);
  b.set(message, 5);
  return b;
}

/** The one message of a unary or client-streaming call's answer (its envelope stripped). */
export function unwrap(body: Buffer): Buffer {
  if (body.length < 5) throw new Error(`gRPC answer of ${body.length} bytes: no message`);
  return body.subarray(5, 5 + body.readUInt32BE(1));
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const DATA = 0x0;
const HEADERS = 0x1;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const PUSH_PROMISE = 0x5;
const PING = 0x6;
const GOAWAY = 0x7;
const WINDOW_UPDATE = 0x8;
const CONTINUATION = 0x9;
const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY = 0x20;
/** The largest flow-control window (2^31 - 1). */
const MAX_WINDOW = 0x7fffffff;

function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const b = Buffer.allocUnsafe(9 + payload.length);
  b.writeUIntBE(payload.length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(stream, 5);
  payload.copy(b, 9);
  return b;
}

function windowUpdate(stream: number, increment: number): Buffer {
  const p = Buffer.allocUnsafe(4);
  p.writeUInt32BE(increment, 0);
  return frame(WINDOW_UPDATE, 0, stream, p);
}

/** An HPACK string literal, not Huffman-coded (the length's 7-bit prefix integer, then the bytes). */
function hpackString(s: string): Buffer {
  const bytes = Buffer.from(s, "utf8");
  return Buffer.concat([hpackInt(bytes.length, 7, 0), bytes]);
}

/** An HPACK integer with an `n`-bit prefix under `high` (RFC 7541 §5.1). */
function hpackInt(value: number, n: number, high: number): Buffer {
  const max = (1 << n) - 1;
  if (value < max) return Buffer.from([high | value]);
  const out = [high | max];
  let v = value - max;
  while (v >= 128) {
    out.push((v % 128) + 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

/** A request's header block as before: every field a literal without indexing, with a new name (BENCH_GRPC_HPACK=literal). */
function literalBlock(headers: [string, string][]): Buffer {
  return Buffer.concat(headers.flatMap(([name, value]) => [Buffer.from([0x00]), hpackString(name), hpackString(value)]));
}

/** HPACK's static table (RFC 7541 Appendix A): index by "name\0value", and the first index of each name. */
const STATIC_FIELDS = new Map<string, number>();
const STATIC_NAMES = new Map<string, number>();
hpackStatic.table.forEach(({ name, value }, i) => {
  STATIC_FIELDS.set(`${name}\0${value}`, i + 1);
  if (!STATIC_NAMES.has(name)) STATIC_NAMES.set(name, i + 1);
});

/**
 * A request header encoder as gRPC's clients have one per connection (nghttp2's for grpc-js, the C
 * core's, grpc-go's): a field already in the dynamic table goes as its index, one byte; any other
 * as a literal with incremental indexing (its name by index when the static table has it), and is
 * added to the table, oldest entries evicted past the server's HEADER_TABLE_SIZE (RFC 7541 §4).
 * So a connection's second call to a path sends a header block of a few bytes.
 */
export class HpackEncoder {
  /** Entries by insertion number: the newest is dynamic index 62. */
  private readonly keys: string[] = [];
  private readonly sizes: number[] = [];
  private readonly newest = new Map<string, number>();
  private inserted = 0;
  private oldest = 0;
  private size = 0;
  private pendingResize: number | undefined;

  constructor(private maxSize = 4096) {}

  /** The server's SETTINGS_HEADER_TABLE_SIZE: the next block starts with a size update to it (4096 at most). */
  resize(limit: number): void {
    const next = Math.min(limit, 4096);
    if (next === this.maxSize) return;
    this.maxSize = next;
    this.pendingResize = next;
    this.evict(0);
  }

  encode(headers: [string, string][]): Buffer {
    const out: Buffer[] = [];
    if (this.pendingResize !== undefined) {
      out.push(hpackInt(this.pendingResize, 5, 0x20));
      this.pendingResize = undefined;
    }
    for (const [name, value] of headers) {
      const key = `${name}\0${value}`;
      const fixed = STATIC_FIELDS.get(key);
      if (fixed !== undefined) {
        out.push(hpackInt(fixed, 7, 0x80));
        continue;
      }
      const at = this.newest.get(key);
      if (at !== undefined && at >= this.oldest) {
        out.push(hpackInt(62 + (this.inserted - 1 - at), 7, 0x80));
        continue;
      }
      const nameIndex = STATIC_NAMES.get(name);
      out.push(nameIndex === undefined ? Buffer.concat([Buffer.from([0x40]), hpackString(name)]) : hpackInt(nameIndex, 6, 0x40));
      out.push(hpackString(value));
      this.insert(key, Buffer.byteLength(name) + Buffer.byteLength(value) + 32);
    }
    return Buffer.concat(out);
  }

  private insert(key: string, size: number): void {
    this.evict(size);
    if (size > this.maxSize) return; // larger than the table: it empties it and is not added
    this.keys.push(key);
    this.sizes.push(size);
    this.newest.set(key, this.inserted++);
    this.size += size;
  }

  /** Evicts the oldest entries until `room` more bytes fit. */
  private evict(room: number): void {
    while (this.oldest < this.inserted && this.size + room > this.maxSize) {
      const key = this.keys[this.oldest] as string;
      this.size -= this.sizes[this.oldest] as number;
      if (this.newest.get(key) === this.oldest) this.newest.delete(key);
      this.oldest++;
    }
  }
}

type Header = { name: string; value: string };

/** Decoded header blocks by their bytes (exact: the server's blocks use no dynamic table). */
const decodedBlocks = new Map<string, Header[]>();

function decodeBlock(block: Buffer): Header[] {
  const key = block.toString("latin1");
  let headers = decodedBlocks.get(key);
  if (headers === undefined) {
    const d = hpack.decompressor.create({ table: { maxSize: 0 } });
    d.write(block);
    d.execute();
    headers = [];
    for (let h = d.read(); h !== null; h = d.read()) headers.push({ name: h.name, value: h.value });
    if (decodedBlocks.size >= 10_000) decodedBlocks.clear();
    decodedBlocks.set(key, headers);
  }
  return headers;
}

/** Whether every field of a header block is an indexed one (RFC 7541 §6.1): decoding it leaves the dynamic table as it was. */
function allIndexed(block: Buffer): boolean {
  let i = 0;
  while (i < block.length) {
    const b = block[i++] as number;
    if ((b & 0x80) === 0) return false;
    if ((b & 0x7f) === 0x7f) while (i < block.length && ((block[i++] as number) & 0x80) !== 0);
  }
  return true;
}

/**
 * The answers' header decoder of one connection whose dynamic table the server may use (4096
 * bytes, the default every gRPC client keeps): every block is decoded, in the order received. A
 * block of indexed fields only is looked up by its bytes until the next block that changes the table.
 */
class ConnectionDecoder {
  private readonly decompressor = hpack.decompressor.create({ table: { maxSize: 4096 } });
  private readonly seen = new Map<string, Header[]>();

  decode(block: Buffer): Header[] {
    const indexed = allIndexed(block);
    const key = indexed ? block.toString("latin1") : "";
    if (indexed) {
      const known = this.seen.get(key);
      if (known) return known;
    } else this.seen.clear();
    this.decompressor.write(block);
    this.decompressor.execute();
    const headers: Header[] = [];
    for (let h = this.decompressor.read(); h !== null; h = this.decompressor.read()) headers.push({ name: h.name, value: h.value });
    if (indexed && this.seen.size < 1000) this.seen.set(key, headers);
    return headers;
  }
}

/**
 * How a connection codes header fields. `indexed` (the default): as gRPC's clients do, requests
 * through HpackEncoder and the server's answers through its dynamic table. `literal`
 * (BENCH_GRPC_HPACK=literal): as this client did before, requests as literals without indexing and
 * HEADER_TABLE_SIZE 0 for the answers, the costliest header blocks for the server to decode and encode.
 */
export type HpackMode = "indexed" | "literal";

export function hpackModeFromEnv(): HpackMode {
  const v = process.env.BENCH_GRPC_HPACK;
  if (v === undefined || v === "" || v === "indexed") return "indexed";
  if (v === "literal") return "literal";
  throw new Error(`BENCH_GRPC_HPACK must be indexed or literal, not ${JSON.stringify(v)}`);
}

interface Call {
  resolve: (body: Buffer) => void;
  reject: (err: Error) => void;
  chunks: Buffer[];
  headersSeen: boolean;
  /** Data not yet sent (flow control); its last frame carries END_STREAM once `source` is done. */
  pending: Buffer[];
  /** More of the body, made as the windows let it go (a long stream), until done. */
  source?: Iterator<Buffer>;
  sendWindow: number;
  /** The header block being received (HEADERS, then CONTINUATIONs) and whether it ends the stream. */
  block?: Buffer[];
  blockEnds?: boolean;
}

export class LeanGrpcConnection {
  private readonly socket: net.Socket;
  private readonly calls = new Map<number, Call>();
  private nextStream = 1;
  private out: Buffer[] = [];
  private flushing = false;
  private input: Buffer = Buffer.alloc(0);
  private failed: Error | undefined;
  /** The server's settings (RFC 9113 defaults until it sends its own). */
  private maxFrame = 16_384;
  private initialWindow = 65_535;
  private connectionWindow = 65_535;
  /** What the server sent this connection since the last WINDOW_UPDATE of ours. */
  private received = 0;
  private readonly blocks = new Map<string, Buffer>();
  private readonly fields = new Map<string, [string, string][]>();
  /** Streams waiting for the connection's window, in order. */
  private readonly blocked = new Set<number>();

  private readonly encoder: HpackEncoder | undefined;
  private readonly decoder: ConnectionDecoder | undefined;

  constructor(port: number, host = "127.0.0.1", authority = `${host}:${port}`, mode: HpackMode = hpackModeFromEnv()) {
    this.authority = authority;
    this.socket = net.connect({ port, host, noDelay: true });
    if (mode === "indexed") {
      this.encoder = new HpackEncoder();
      this.decoder = new ConnectionDecoder();
    }
    const settings = Buffer.alloc(18);
    settings.writeUInt16BE(0x1, 0); // HEADER_TABLE_SIZE: 0 for literal, else the default
    settings.writeUInt32BE(mode === "literal" ? 0 : 4096, 2);
    settings.writeUInt16BE(0x2, 6); // ENABLE_PUSH 0
    settings.writeUInt32BE(0, 8);
    settings.writeUInt16BE(0x4, 12); // INITIAL_WINDOW_SIZE
    settings.writeUInt32BE(MAX_WINDOW, 14);
    this.send(PREFACE, frame(SETTINGS, 0, 0, settings), windowUpdate(0, MAX_WINDOW - 65_535));
    this.socket.on("data", (chunk: Buffer) => this.onData(chunk));
    this.socket.on("error", (err) => this.fail(err));
    this.socket.on("close", () => this.fail(new Error("the connection closed")));
  }

  private readonly authority: string;

  /**
   * One call to `path` with `body` (its envelopes; an array is sent as it is, slice by slice; an
   * iterator's slices are made only as the flow-control windows let them go, so a long stream is
   * encoded while it is sent, as a client streaming from its source would): resolves with the
   * answer's body once its trailers say grpc-status 0, rejects otherwise.
   */
  call(path: string, body: Buffer | Buffer[] | Iterator<Buffer>, key?: string): Promise<Buffer> {
    if (this.failed) return Promise.reject(this.failed);
    const id = this.nextStream;
    this.nextStream += 2;
    const blockKey = `${path} ${key ?? ""}`;
    let fields = this.fields.get(blockKey);
    if (fields === undefined) {
      fields = [
        [":method", "POST"],
        [":scheme", "http"],
        [":path", path],
        [":authority", this.authority],
        ["content-type", "application/grpc"],
        ["te", "trailers"],
        ...(key ? ([["x-api-key", key]] as [string, string][]) : []),
      ];
      this.fields.set(blockKey, fields);
    }
    // Encoded as the call is sent: an encoder's blocks must reach the server in the order it made them.
    let block = this.encoder?.encode(fields);
    if (block === undefined) {
      block = this.blocks.get(blockKey);
      if (block === undefined) this.blocks.set(blockKey, (block = literalBlock(fields)));
    }
    return new Promise((resolve, reject) => {
      const call: Call = {
        resolve,
        reject,
        chunks: [],
        headersSeen: false,
        pending: Array.isArray(body) ? [...body] : Buffer.isBuffer(body) ? [body] : [],
        source: Array.isArray(body) || Buffer.isBuffer(body) ? undefined : body,
        sendWindow: this.initialWindow,
      };
      this.calls.set(id, call);
      this.send(frame(HEADERS, END_HEADERS, id, block));
      this.sendData(id, call);
    });
  }

  /** Sends what the windows allow of a stream's pending data; the last frame ends the stream. */
  private sendData(id: number, call: Call): void {
    for (;;) {
      // One slice ahead of the one being sent, so that the last frame is known to be the last.
      if (call.source && call.pending.length < 2) {
        const next = call.source.next();
        if (next.done) call.source = undefined;
        else call.pending.push(next.value);
        continue;
      }
      if (call.pending.length === 0) break;
      const head = call.pending[0] as Buffer;
      const n = Math.min(head.length, this.maxFrame, call.sendWindow, this.connectionWindow);
      if (n === 0 && head.length > 0) {
        this.blocked.add(id);
        return;
      }
      const last = n === head.length && call.pending.length === 1 && !call.source;
      this.send(frame(DATA, last ? END_STREAM : 0, id, head.subarray(0, n)));
      call.sendWindow -= n;
      this.connectionWindow -= n;
      if (n === head.length) call.pending.shift();
      else call.pending[0] = head.subarray(n);
    }
    this.blocked.delete(id);
  }

  private send(...buffers: Buffer[]): void {
    this.out.push(...buffers);
    if (this.flushing) return;
    this.flushing = true;
    process.nextTick(() => {
      this.flushing = false;
      const out = this.out;
      this.out = [];
      if (!this.socket.destroyed) this.socket.write(out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out));
    });
  }

  private onData(chunk: Buffer): void {
    this.input = this.input.length === 0 ? chunk : Buffer.concat([this.input, chunk]);
    let at = 0;
    try {
      while (this.input.length - at >= 9) {
        const length = this.input.readUIntBE(at, 3);
        if (this.input.length - at < 9 + length) break;
        const type = this.input[at + 3] as number;
        const flags = this.input[at + 4] as number;
        const stream = this.input.readUInt32BE(at + 5) & 0x7fffffff;
        const payload = this.input.subarray(at + 9, at + 9 + length);
        at += 9 + length;
        this.onFrame(type, flags, stream, payload);
      }
    } catch (err) {
      this.fail(err instanceof Error ? err : new Error(String(err)));
      this.socket.destroy();
      return;
    }
    this.input = at === this.input.length ? Buffer.alloc(0) : this.input.subarray(at);
  }

  private onFrame(type: number, flags: number, stream: number, payload: Buffer): void {
    switch (type) {
      case DATA: {
        this.received += payload.length;
        if (this.received > MAX_WINDOW / 2) {
          this.send(windowUpdate(0, this.received));
          this.received = 0;
        }
        const call = this.calls.get(stream);
        if (!call) return;
        call.chunks.push(Buffer.from(unpad(flags, payload)));
        if (flags & END_STREAM) this.finish(stream, call, undefined);
        return;
      }
      case HEADERS: {
        const call = this.calls.get(stream);
        let block = unpad(flags, payload);
        if (flags & PRIORITY) block = block.subarray(5);
        if (!call) {
          if (!(flags & END_HEADERS)) throw new Error("CONTINUATION of a stream with no call is not handled");
          this.decoder?.decode(Buffer.from(block)); // it may change the dynamic table
          return;
        }
        call.block = [Buffer.from(block)];
        call.blockEnds = (flags & END_STREAM) !== 0;
        if (flags & END_HEADERS) this.onHeaders(stream, call);
        return;
      }
      case CONTINUATION: {
        const call = this.calls.get(stream);
        if (!call?.block) throw new Error(`CONTINUATION on stream ${stream} without HEADERS`);
        call.block.push(Buffer.from(payload));
        if (flags & END_HEADERS) this.onHeaders(stream, call);
        return;
      }
      case RST_STREAM: {
        const call = this.calls.get(stream);
        if (call) this.end(stream, call, new Error(`stream reset by the server (code ${payload.readUInt32BE(0)})`));
        return;
      }
      case SETTINGS: {
        if (flags & ACK) return;
        for (let i = 0; i + 6 <= payload.length; i += 6) {
          const id = payload.readUInt16BE(i);
          const value = payload.readUInt32BE(i + 2);
          if (id === 0x4) {
            const delta = value - this.initialWindow;
            this.initialWindow = value;
            for (const c of this.calls.values()) c.sendWindow += delta;
          } else if (id === 0x5) this.maxFrame = value;
          else if (id === 0x1) this.encoder?.resize(value);
        }
        this.send(frame(SETTINGS, ACK, 0));
        this.unblock();
        return;
      }
      case PING:
        if (!(flags & ACK)) this.send(frame(PING, ACK, 0, Buffer.from(payload)));
        return;
      case GOAWAY:
        this.fail(new Error(`GOAWAY from the server (code ${payload.readUInt32BE(4)})`));
        return;
      case WINDOW_UPDATE: {
        const increment = payload.readUInt32BE(0) & 0x7fffffff;
        if (stream === 0) this.connectionWindow += increment;
        else {
          const call = this.calls.get(stream);
          if (call) call.sendWindow += increment;
        }
        this.unblock();
        return;
      }
      case PUSH_PROMISE:
        throw new Error("PUSH_PROMISE after ENABLE_PUSH 0");
      default:
        return; // PRIORITY and unknown frame types are ignored
    }
  }

  private unblock(): void {
    for (const id of [...this.blocked]) {
      const call = this.calls.get(id);
      if (call) this.sendData(id, call);
      else this.blocked.delete(id);
    }
  }

  /** A complete header block: the answer's headers (`:status` 200), or its trailers. */
  private onHeaders(stream: number, call: Call): void {
    const block = call.block?.length === 1 ? (call.block[0] as Buffer) : Buffer.concat(call.block ?? []);
    const ends = call.blockEnds === true;
    call.block = undefined;
    // With a dynamic table every block is decoded in the order received; without one (literal), the
    // answer's headers, which vary per call (a request ID), are decoded only when their first
    // field is not `:status: 200` as the static table's entry 8 (0x88), after a table size update
    // (0x20) at most: pseudo-header fields come first.
    const decoded = this.decoder?.decode(block);
    if (!call.headersSeen) {
      call.headersSeen = true;
      const first = block[0] === 0x20 ? block[1] : block[0];
      const status = decoded ? decoded.find((h) => h.name === ":status")?.value : first === 0x88 ? "200" : decodeBlock(block).find((h) => h.name === ":status")?.value;
      if (status !== "200") {
        this.end(stream, call, new Error(`HTTP status ${status}`));
        return;
      }
      if (!ends) return;
    }
    if (ends) this.finish(stream, call, decoded ?? decodeBlock(block));
  }

  /** The stream ended: grpc-status 0 in the trailers (or a trailers-only answer) resolves. */
  private finish(stream: number, call: Call, trailers: Header[] | undefined): void {
    const status = trailers?.find((h) => h.name === "grpc-status")?.value;
    if (status === "0") {
      this.calls.delete(stream);
      this.blocked.delete(stream);
      call.resolve(call.chunks.length === 1 ? (call.chunks[0] as Buffer) : Buffer.concat(call.chunks));
      return;
    }
    const message = trailers?.find((h) => h.name === "grpc-message")?.value ?? "";
    this.end(stream, call, new Error(status === undefined ? "the stream ended without a grpc-status" : `grpc-status ${status}: ${decodeURIComponent(message)}`));
  }

  private end(stream: number, call: Call, err: Error): void {
    this.calls.delete(stream);
    this.blocked.delete(stream);
    call.reject(err);
  }

  private fail(err: Error): void {
    this.failed ??= err;
    for (const [id, call] of [...this.calls]) this.end(id, call, err);
  }

  close(): void {
    this.send(frame(GOAWAY, 0, 0, Buffer.alloc(8)));
    setTimeout(() => this.socket.end(), 10);
  }
}

/** A frame's payload without its padding (PADDED: a length byte first, that many bytes last). */
function unpad(flags: number, payload: Buffer): Buffer {
  if (!(flags & PADDED)) return payload;
  const pad = payload[0] as number;
  if (pad >= payload.length) throw new Error("padding longer than the frame");
  return payload.subarray(1, payload.length - pad);
}
