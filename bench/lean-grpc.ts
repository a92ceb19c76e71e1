/**
 * A lean gRPC client for the load generator: unary and client-streaming calls over HTTP/2 on a
 * plain TCP socket, framed here (RFC 9113) rather than by node:http2, whose client costs as much
 * CPU per call as the server it measures, on the two CPUs they share. It is to gRPC what
 * LeanHttpConnection (lib.ts) is to REST: it sends what any gRPC client sends and checks every
 * answer, at a fraction of the CPU.
 *
 * What it does of HTTP/2: the preface and SETTINGS (no server push; HEADER_TABLE_SIZE 0, so the
 * server's header blocks use no dynamic table and each decodes on its own: the decoded blocks
 * are kept by their bytes, and a repeated one is not decoded again); HEADERS + CONTINUATION,
 * padding; flow control both ways (the server's windows and MAX_FRAME_SIZE bound what it sends;
 * its own windows are opened wide and topped up); PING answered; RST_STREAM and GOAWAY fail the
 * calls they end. Header blocks are decoded with hpack.js (Huffman included), except an answer's
 * headers that start with `:status: 200`; the request's are literals without indexing, built once
 * per path and key. What a tick sends goes in one write.
 */
import net from "node:net";
import hpack from "hpack.js";

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

/** A request's header block: every field a literal without indexing, with a new name. */
function requestBlock(headers: [string, string][]): Buffer {
  return Buffer.concat(headers.flatMap(([name, value]) => [Buffer.from([0x00]), hpackString(name), hpackString(value)]));
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
  /** Streams waiting for the connection's window, in order. */
  private readonly blocked = new Set<number>();

  constructor(port: number, host = "127.0.0.1", authority = `${host}:${port}`) {
    this.authority = authority;
    this.socket = net.connect({ port, host, noDelay: true });
    const settings = Buffer.alloc(18);
    settings.writeUInt16BE(0x1, 0); // HEADER_TABLE_SIZE 0
    settings.writeUInt32BE(0, 2);
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
    let block = this.blocks.get(blockKey);
    if (block === undefined) {
      block = requestBlock([
        [":method", "POST"],
        [":scheme", "http"],
        [":path", path],
        [":authority", this.authority],
        ["content-type", "application/grpc"],
        ["te", "trailers"],
        ...(key ? ([["x-api-key", key]] as [string, string][]) : []),
      ]);
      this.blocks.set(blockKey, block);
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
    if (!call.headersSeen) {
      call.headersSeen = true;
      // The answer's headers vary per call (a request ID, the date), so they are decoded only
      // when their first field is not `:status: 200` as the static table's entry 8 (0x88), after
      // a table size update (0x20) at most: pseudo-header fields come first.
      const first = block[0] === 0x20 ? block[1] : block[0];
      const status = first === 0x88 ? "200" : decodeBlock(block).find((h) => h.name === ":status")?.value;
      if (status !== "200") {
        this.end(stream, call, new Error(`HTTP status ${status}`));
        return;
      }
      if (!ends) return;
    }
    if (ends) this.finish(stream, call, decodeBlock(block));
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
